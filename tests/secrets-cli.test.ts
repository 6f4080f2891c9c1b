// `ep secret set|ls|grant|revoke|rm` as the built CLI against the built ep-tower: the value goes
// in on stdin only, listings never show it, errors have their exit codes.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundleEntries, ROOT, registerNode, spawnTowerProcess, type TowerProcess } from "./epd-harness.js";
import { tempHome } from "./harness.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const VALUE = `cli-value-${randomBytes(10).toString("hex")}`;
const OUT = join(ROOT, "dist", "secrets-cli-test");

function ep(
  args: string[],
  env: Record<string, string>,
  stdin = "",
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(OUT, "main.js"), ...args], {
      env: { ...process.env, ...env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr }));
    child.stdin.end(stdin);
  });
}

describe("ep secret (built CLI, real ep-tower)", () => {
  const h = tempHome("ep-seccli-");
  let tower: TowerProcess;
  let env: Record<string, string>;
  let agentId: string;

  beforeAll(async () => {
    await bundleEntries({ main: join(ROOT, "cli/main.ts") }, OUT);
    tower = await spawnTowerProcess(h.dir, { EP_SECRET_KEY: randomBytes(32).toString("base64") });
    env = { EP_HOME: join(h.dir, "cli-home"), EP_BASE_URL: tower.url, EP_TOKEN: tower.adminToken };
    const node = await registerNode(tower.url, tower.adminToken, join(h.dir, "node.json"));
    const { createClient } = await import("@connectrpc/connect");
    const { createConnectTransport } = await import("@connectrpc/connect-node");
    const { AgentService } = await import("../gen/ep/tower/v1/fleet_pb.js");
    const { WorkService } = await import("../gen/ep/tower/v1/work_pb.js");
    const t = (token: string) =>
      createConnectTransport({
        baseUrl: tower.url,
        httpVersion: "1.1",
        interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${token}`), next(req))],
      });
    const domainId = (await createClient(WorkService, t(tower.adminToken)).createDomain({ name: "cli" })).domain!.id;
    agentId = (await createClient(AgentService, t(node.token)).enrollAgent({ domainId, runtime: Runtime.SHELL })).agent!
      .id;
  }, 60_000);

  afterAll(async () => {
    await tower?.stop();
    h.cleanup();
  });

  it("set from stdin, ls, grant, revoke, rm; never the value on any output", async () => {
    const outputs: string[] = [];
    const run = async (args: string[], stdin?: string) => {
      const r = await ep(args, env, stdin);
      outputs.push(r.stdout, r.stderr);
      return r;
    };
    const set = await run(["secret", "set", "API_KEY"], VALUE + "\n");
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toContain("API_KEY");
    const grant = await run(["secret", "grant", "API_KEY", "--agent", agentId]);
    expect(grant.code, grant.stderr).toBe(0);
    const ls = await run(["secret", "ls", "--json"]);
    expect(ls.code, ls.stderr).toBe(0);
    const listed = JSON.parse(ls.stdout) as {
      secrets: { name: string; granted_agents?: string[]; grantedAgents?: string[] }[];
    };
    expect(listed.secrets.map((s) => s.name)).toEqual(["API_KEY"]);
    expect(JSON.stringify(listed)).toContain(agentId);
    const human = await run(["secret", "ls"]);
    expect(human.stdout).toContain("API_KEY");
    expect((await run(["secret", "revoke", "API_KEY", "--agent", agentId])).code).toBe(0);
    // errors: usage (2), unknown secret (4)
    expect((await run(["secret", "grant", "API_KEY"])).code).toBe(2);
    expect((await run(["secret", "rm", "NOPE"])).code).toBe(4);
    expect((await run(["secret", "rm", "API_KEY"])).code).toBe(0);
    expect(JSON.parse((await run(["secret", "ls", "--json"])).stdout).secrets).toEqual([]);
    for (const o of outputs) expect(o).not.toContain(VALUE);
  }, 60_000);
});
