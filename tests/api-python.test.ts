// Issue 39, point 6: docs/api.md's Python client, its ```python block verbatim, with Debian's
// packages (the doc's Debian route) against a real tower over h2c: it creates a domain, a mission
// and a shell task, lists the queued task, and reads EP's ErrorDetail from a NOT_FOUND.
import { afterAll, beforeAll, describe, it } from "vitest";
import { startTower, type TestTower } from "./harness.js";
import { expectDocClientRan, pythonClient } from "./python-client.js";

const python = pythonClient("api-python");
let t: TestTower;
beforeAll(async () => {
  t = await startTower();
});
afterAll(async () => {
  await t?.close();
  python.close();
});

describe.skipIf(python.skip)("docs/api.md's Python client (Debian's python3-grpcio)", () => {
  it("creates, lists and reads EP's error detail over h2c", async () => {
    const run = await python.run({ EP_TOWER: new URL(t.url).host, EP_TOKEN: t.adminToken });
    await expectDocClientRan(run, t);
  }, 120_000);
});
