// The node-domain commands as an operator uses them: register with --domain (names accepted),
// `ep node ls` shows what each node serves, `ep node domains set` changes it, doctor says it.
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assertBuilt, ep } from "./cli-helpers.js";
import { startTower, tempHome, type TestTower } from "./harness.js";

let t: TestTower;
let env: Record<string, string>;
const home = tempHome("ep-cli-domains-");

beforeAll(async () => {
  assertBuilt();
  t = await startTower();
  env = { EP_HOME: home.dir, EP_BASE_URL: t.url, EP_TOKEN: t.adminToken, EP_NODE_FILE: join(home.dir, "node.json") };
});

afterAll(async () => {
  await t?.close();
  home.cleanup();
});

describe("node domains from the CLI", () => {
  it("registers with domains by name, lists them, changes them, and doctor shows them", async () => {
    const demo = (await ep(["domain", "create", "demo", "--json"], { env })).json().domain.id;
    const ops = (await ep(["domain", "create", "ops", "--json"], { env })).json().domain.id;
    const reg = await ep(
      ["agent", "node", "register", "--hostname", "w1", "--domain", "demo", "--domain", ops, "--json"],
      { env },
    );
    expect(reg.code).toBe(0);
    expect(reg.json().domains).toEqual([demo, ops]);
    const nodeId = reg.json().node_id;
    const ls = await ep(["node", "ls"], { env });
    expect(ls.stdout).toMatch(/DOMAINS/i);
    expect(ls.stdout).toContain("demo,ops"); // by name; --wide and --json keep the ids
    expect((await ep(["node", "ls", "--wide"], { env })).stdout).toContain(`${demo},${ops}`);
    const doctor = await ep(["system", "doctor", "--json"], { env });
    expect(JSON.stringify(doctor.json())).toContain(`serves ${demo}, ${ops}`);

    const set = await ep(["node", "domains", "set", nodeId, "--all"], { env });
    expect(set.stdout).toContain("now serves * (all domains)");
    expect(
      (await ep(["node", "ls", "--json"], { env })).json().nodes.find((n: { id: string }) => n.id === nodeId).domains,
    ).toEqual(["*"]);

    const wide = await ep(["agent", "node", "register", "--hostname", "w2"], {
      env: { ...env, EP_NODE_FILE: join(home.dir, "node2.json") },
    });
    expect(wide.stdout).toContain("serves * (all domains)");
    // mistakes are named
    const unknown = await ep(["node", "domains", "set", nodeId, "--domain", "nope"], { env });
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain("domain nope does not exist");
    const both = await ep(["node", "domains", "set", nodeId], { env });
    expect(both.code).toBe(2);
    expect(both.stderr).toContain("--domain <id|name> (repeatable) or --all");
  });
});
