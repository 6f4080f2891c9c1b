// withDefaultUser: a PostgreSQL URL without a user connects as PGUSER (else the OS user), like
// libpq, in both URL forms: host:port, and the Unix-socket form whose host is a query parameter.
import { afterEach, describe, expect, it } from "vitest";
import { withDefaultUser } from "./pg-support.js";

const saved = process.env.PGUSER;
afterEach(() => {
  if (saved === undefined) delete process.env.PGUSER;
  else process.env.PGUSER = saved;
});

describe("withDefaultUser", () => {
  it("puts PGUSER before the host, and leaves a URL that names its user alone", () => {
    process.env.PGUSER = "ep_ops";
    expect(withDefaultUser("postgres://127.0.0.1:5432/test")).toBe("postgres://ep_ops@127.0.0.1:5432/test");
    expect(withDefaultUser("postgres://alice@db:5432/ep")).toBe("postgres://alice@db:5432/ep");
  });

  it("gives the socket form (no host) its user as a query parameter pg reads", () => {
    process.env.PGUSER = "ep_ops";
    const url = new URL(withDefaultUser("postgres:///ep?host=/var/run/postgresql"));
    expect(url.searchParams.get("user")).toBe("ep_ops");
    expect(url.searchParams.get("host")).toBe("/var/run/postgresql");
    expect(url.pathname).toBe("/ep");
    expect(withDefaultUser("postgres:///ep?host=/var/run/postgresql&user=alice")).toBe(
      "postgres:///ep?host=/var/run/postgresql&user=alice",
    );
  });

  it("leaves what is not a URL to pg (which names the problem)", () => {
    expect(withDefaultUser("not a url")).toBe("not a url");
  });
});
