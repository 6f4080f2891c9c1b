// SIGTERM lets in-flight requests finish, then closes the store and exits 0.
import Database from "better-sqlite3";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { spawnTower, tempHome } from "./harness.js";

const home = tempHome("ep-shutdown-");
afterAll(() => home.cleanup());

describe("graceful shutdown", () => {
  it("answers the request in flight, exits 0 and leaves a clean database", async () => {
    const tower = await spawnTower(home.dir);
    const headers = { authorization: `Bearer ${tower.adminToken}`, "content-type": "application/json" };
    const post = async (path: string, body: unknown) =>
      (await fetch(tower.url + path, { method: "POST", headers, body: JSON.stringify(body) })).json() as Promise<any>;
    const { domain } = await post("/domains", { name: "bye" });
    const reg = await fetch(`${tower.url}/ep.tower.v1.AgentService/EnrollAgent`, {
      method: "POST",
      headers,
      body: JSON.stringify({ domainId: domain.id, runtime: "RUNTIME_SHELL" }),
    });
    const { agent } = (await reg.json()) as { agent: { id: string } };

    // a long-polling claim is in flight when SIGTERM arrives
    const inflight = fetch(`${tower.url}/work/agents/${agent.id}/claim`, {
      method: "POST",
      headers,
      body: JSON.stringify({ wait_ms: 20_000 }),
    });
    await new Promise((r) => setTimeout(r, 200));
    const exited = new Promise<number | null>((r) => tower.child.once("exit", (code) => r(code)));
    const t0 = Date.now();
    tower.child.kill("SIGTERM");
    const res = await inflight;
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({}); // no task: the waiter was released, not dropped
    expect(await exited).toBe(0);
    expect(Date.now() - t0).toBeLessThan(10_000);

    const db = new Database(join(home.dir, "tower", "ep.db"));
    expect(db.pragma("integrity_check", { simple: true })).toBe("ok");
    db.close();
  });
});
