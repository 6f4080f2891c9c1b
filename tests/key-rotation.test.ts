// Two towers on one store: a signing key made by one is trusted by the other at once,
// and closing a tower twice is harmless.
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { startTower, tempHome, type TestTower } from "./harness.js";

const home = tempHome("ep-keys-");
const towers: TestTower[] = [];
afterAll(async () => {
  for (const t of towers) await t.close();
  home.cleanup();
});

describe("signing keys across towers", () => {
  it("verifies a node token signed with a key the other tower made after it started", async () => {
    const db = `sqlite:${join(home.dir, "tower", "ep.db")}`;
    const a = await startTower({ home: home.dir, env: { EP_DATABASE_URL: db } });
    towers.push(a);
    const b = await startTower({ home: home.dir, env: { EP_DATABASE_URL: db } });
    towers.push(b);
    // b has loaded its key set by verifying a node token
    const first = await a.client(NodeService).registerNode({ hostname: "n1" });
    expect((await b.api("GET", "/domains", undefined, first.token)).status).toBe(200);

    await a.tower.services.auth.rotateSigningKey();
    const second = await a.client(NodeService).registerNode({ hostname: "n2" });
    expect((await b.api("GET", "/domains", undefined, second.token)).status).toBe(200);
    expect((await b.api("GET", "/domains", undefined, first.token)).status).toBe(200);
  });

  it("closes twice without error", async () => {
    const t = towers.pop()!;
    await t.close();
    await expect(t.close()).resolves.toBeUndefined();
  });
});
