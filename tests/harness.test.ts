// The in-process tower of tests/harness.ts reads its settings from the env it is given, like
// ep-tower reads its own environment, so tests never need to change process.env.
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { SecretService } from "../gen/ep/tower/v1/secrets_pb.js";
import { createServer } from "node:net";
import { join } from "node:path";
import { freePort, ROOT, spawnTower, spawnTowerChild, startTower, tempHome, type TestTower } from "./harness.js";

let t: TestTower | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

describe("startTower({ env })", () => {
  it("gives the tower its secret-store key without touching process.env", async () => {
    expect(process.env.EP_SECRET_KEY).toBeUndefined();
    t = await startTower({ env: { EP_SECRET_KEY: randomBytes(32).toString("base64") } });
    const secrets = t.client(SecretService);
    const domainId = (await t.api("POST", "/domains", { name: "keyed" })).body.domain.id;
    const set = await secrets.setSecret({ name: "API_TOKEN", domainId, value: "v-1" });
    expect(set.secret).toMatchObject({ name: "API_TOKEN", version: 1 });
    expect(process.env.EP_SECRET_KEY).toBeUndefined();
  });

  it("gives the tower its AI settings: a provider without its key is a startup error", async () => {
    await expect(startTower({ env: { EP_AI_PROVIDER: "providerA" } })).rejects.toThrow(/PROVIDERA_API_KEY/);
  });

  it("without a key the secret store says how to configure one", async () => {
    t = await startTower();
    const domainId = (await t.api("POST", "/domains", { name: "unkeyed" })).body.domain.id;
    await expect(t.client(SecretService).setSecret({ name: "API_TOKEN", domainId, value: "v" })).rejects.toThrow(
      /EP_SECRET_KEY/,
    );
  });
});

describe("spawnTowerChild", () => {
  it("starts the tower again on another port when the one it picked was taken meanwhile", async () => {
    const squatter = createServer().listen(0, "127.0.0.1");
    await new Promise((r) => squatter.once("listening", r));
    const taken = (squatter.address() as { port: number }).port;
    const home = tempHome("ep-harness-port-");
    const picks = [taken];
    try {
      const tower = await spawnTowerChild({
        entry: join(ROOT, "bin", "ep-tower.js"),
        home: home.dir,
        pickPort: async () => picks.shift() ?? freePort(),
      });
      expect(tower.port).not.toBe(taken);
      expect((await fetch(tower.url + "/healthz")).ok).toBe(true);
      await tower.stop();
    } finally {
      squatter.close();
      home.cleanup();
    }
  });

  it("does not take another tower on the picked port for its own", async () => {
    const first = tempHome("ep-harness-a-");
    const second = tempHome("ep-harness-b-");
    const a = await spawnTower(first.dir);
    const picks = [a.port];
    try {
      const b = await spawnTowerChild({
        entry: join(ROOT, "bin", "ep-tower.js"),
        home: second.dir,
        pickPort: async () => picks.shift() ?? freePort(),
      });
      expect(b.port).not.toBe(a.port);
      await b.stop();
    } finally {
      await a.stop();
      first.cleanup();
      second.cleanup();
    }
  });
});
