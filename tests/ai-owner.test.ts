// AI sessions belong to the account (the token's name), so rotating a token or logging
// in to the console again keeps them; another account still cannot see them.
import { Role } from "../gen/ep/tower/v1/resources_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { startTower, type TestTower } from "./harness.js";

let t: TestTower;
beforeAll(async () => {
  t = await startTower();
});
afterAll(async () => {
  await t?.close();
});

describe("AI session ownership", () => {
  it("survives token rotation and console login, and stays private to the account", async () => {
    const auth = t.client(AuthService);
    const first = await auth.createToken({ name: "alice", role: Role.OPERATOR });
    const created = await t.api("POST", "/ai/sessions", {}, first.secret);
    expect(created.status).toBeLessThan(300);
    const id = created.body.session?.id ?? created.body.id;

    const rotated = await auth.createToken({ name: "alice", role: Role.OPERATOR });
    await auth.revokeToken({ tokenId: first.token!.id });
    expect((await t.api("GET", `/ai/sessions/${id}`, undefined, rotated.secret)).status).toBe(200);

    // a console login through a ticket that alice asked for
    const ticket = (await t.client(AuthService, rotated.secret).createTicket({ purpose: "login" })).ticket;
    const login = await fetch(`${t.url}/auth/session`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ticket }),
    });
    expect(login.status).toBe(200);
    expect(((await login.json()) as { subject: string }).subject).toBe("alice");
    const cookie = login.headers.get("set-cookie")!.split(";")[0];
    const viaCookie = await fetch(`${t.url}/ai/sessions/${id}`, { headers: { cookie } });
    expect(viaCookie.status).toBe(200);

    const bob = await auth.createToken({ name: "bob", role: Role.OPERATOR });
    expect((await t.api("GET", `/ai/sessions/${id}`, undefined, bob.secret)).status).toBe(404);
  });
});
