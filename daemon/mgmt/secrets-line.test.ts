import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { EpError, toEpError } from "../../common/errors.js";
import { silentLogger } from "../../common/log.js";
import { SecretsService } from "../../gen/ep/secrets/v1/secrets_pb.js";
import { createMgmtTransport, getSecretLine } from "./client.js";
import { openRawClient } from "./line-client.test-util.js";
import { serveSecretsSocket } from "./secrets-line.js";
import type { UnixSocketServer } from "./socket-server.js";

const VALUE = "s3cr3t-value-42";

/** The broker's decision, faked: session ses_live may read DB_PASSWORD. */
async function getSecret(session: string, name: string): Promise<string> {
  if (session === "ses_boom") throw new Error(`driver crashed while holding ${VALUE}`);
  if (session !== "ses_live") throw new EpError("forbidden", "the session is not a live agent of this daemon");
  if (name !== "DB_PASSWORD") throw new EpError("secret_not_found", `no secret ${name} is granted to this agent`);
  return VALUE;
}

let dir: string;
let path: string;
let server: UnixSocketServer;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "ep-secrets-"));
  path = join(dir, "secrets.sock");
  server = await serveSecretsSocket({ path, getSecret, log: silentLogger });
});

afterEach(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const get = (session: unknown, name: unknown) => JSON.stringify({ op: "get", session, name }) + "\n";

describe("secrets line protocol", () => {
  it("one JSON line in, one JSON line out; the socket is 0600", async () => {
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const raw = await openRawClient(path);
    raw.send(get("ses_live", "DB_PASSWORD"));
    expect(await raw.next()).toEqual({ ok: true, value: VALUE });
    raw.end();
    expect(await getSecretLine(path, "ses_live", "DB_PASSWORD")).toBe(VALUE);
  });

  it("each bad request gets its error and the broker keeps serving", async () => {
    const raw = await openRawClient(path);
    const cases: [string, string, string?][] = [
      ["not json at all\n", "invalid_json"],
      ['{"op":"get",\n', "invalid_json"],
      ["[1,2]\n", "invalid_argument", "request"],
      ['{"session":"ses_live","name":"DB_PASSWORD"}\n', "invalid_argument", "op"],
      ['{"op":"put","session":"ses_live","name":"DB_PASSWORD"}\n', "invalid_argument", "op"],
      ['{"op":"get","name":"DB_PASSWORD"}\n', "invalid_argument", "session"],
      ['{"op":"get","session":"ses_live"}\n', "invalid_argument", "name"],
      [get("ses_live", 7), "invalid_argument", "name"],
      [get("", "DB_PASSWORD"), "invalid_argument", "session"],
      ['{"op":"get","session":"ses_live","name":"DB_PASSWORD","value":"x"}\n', "unknown_field", "value"],
      [get("ses_other", "DB_PASSWORD"), "forbidden"],
      [get("ses_live", "API_KEY"), "secret_not_found"],
    ];
    for (const [line, code, field] of cases) {
      raw.send(line);
      const reply = (await raw.next()) as { ok: boolean; error: { code: string; message: string } };
      expect(reply.ok, line).toBe(false);
      expect(reply.error.code, line).toBe(code);
      expect(typeof reply.error.message).toBe("string");
      if (field) expect(reply.error.message, line).toContain(field);
      expect(Object.keys(reply.error).sort()).toEqual(["code", "message"]);
    }
    raw.send(get("ses_live", "DB_PASSWORD"));
    expect(await raw.next()).toEqual({ ok: true, value: VALUE });
    raw.end();
  });

  it("an unexpected failure never echoes its text, which could hold a value", async () => {
    const raw = await openRawClient(path);
    raw.send(get("ses_boom", "DB_PASSWORD"));
    const reply = (await raw.next()) as { ok: boolean; error: { code: string; message: string } };
    raw.end();
    expect(reply).toMatchObject({ ok: false, error: { code: "internal" } });
    expect(JSON.stringify(reply)).not.toContain(VALUE);
  });

  it("a 1 MiB line gets payload_too_large, its connection closes, and the broker keeps serving", async () => {
    const raw = await openRawClient(path);
    raw.send(get("ses_live", "N".repeat(1024 * 1024)));
    expect(await raw.next()).toEqual({
      ok: false,
      error: { code: "payload_too_large", message: expect.stringContaining("1048576") },
    });
    await raw.closed;
    expect(await getSecretLine(path, "ses_live", "DB_PASSWORD")).toBe(VALUE);
  });

  it("getSecretLine turns a refusal into the EpError it names", async () => {
    await expect(getSecretLine(path, "ses_other", "DB_PASSWORD")).rejects.toMatchObject({ code: "forbidden" });
    await expect(getSecretLine(join(dir, "gone.sock"), "ses_live", "DB_PASSWORD")).rejects.toMatchObject({
      code: "unavailable",
    });
  });
});

describe("Connect SecretsService on the same socket", () => {
  it("answers GetSecret through the generated client with the same decisions", async () => {
    const client = createClient(SecretsService, createMgmtTransport(path));
    expect((await client.getSecret({ session: "ses_live", name: "DB_PASSWORD" })).value).toBe(VALUE);

    const denied = await client.getSecret({ session: "ses_other", name: "DB_PASSWORD" }).catch((e: unknown) => e);
    expect((denied as ConnectError).code).toBe(Code.PermissionDenied);
    expect(toEpError(denied).code).toBe("forbidden");

    const missing = await client.getSecret({ session: "ses_live", name: "" }).catch((e: unknown) => e);
    expect(toEpError(missing)).toMatchObject({ code: "invalid_argument", details: { field: "name" } });

    const boom = await client.getSecret({ session: "ses_boom", name: "DB_PASSWORD" }).catch((e: unknown) => e);
    expect(boom).toBeInstanceOf(ConnectError);
    expect((boom as ConnectError).rawMessage).not.toContain(VALUE);
  });
});
