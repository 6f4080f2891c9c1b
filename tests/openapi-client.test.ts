// Issue 39, point 3: an integrator generates a typed REST client from /openapi.json with
// openapi-typescript, writes a small program with openapi-fetch that creates a shell task (its
// `input.command`, a google.protobuf.Struct field) and reads it back, type-checks it with `strict`,
// and runs it against a real tower.
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { INTEGRATORS_MODULES, integratorTool } from "./integrator-tools.js";
import { startTower, type TestTower } from "./harness.js";

const generator = integratorTool("openapi-typescript", "bin/cli.js", "openapi-client");
const tsc = integratorTool("typescript", "bin/tsc", "openapi-client");

function run(args: string[], env: Record<string, string> = {}): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, args, { env: { ...process.env, ...env }, timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr });
    });
  });
}

/** The integrator's program, for the tower at `url` with `token`. */
const client = (url: string, token: string) => `import createClient from "openapi-fetch";
import type { paths } from "./ep-api.js";

const ep = createClient<paths>({ baseUrl: ${JSON.stringify(url)}, headers: { authorization: "Bearer ${token}" } });

const domain = await ep.POST("/domains", { body: { name: "generated-client" } });
const domainId = domain.data?.domain?.id ?? "";
const mission = await ep.POST("/domains/{domain_id}/m", {
  params: { path: { domain_id: domainId } },
  body: { title: "typed" },
});
const missionId = mission.data?.mission?.id ?? "";
const created = await ep.POST("/work/missions/{mission_id}/tasks", {
  params: { path: { mission_id: missionId } },
  body: { title: "say hi", runtime: "shell", input: { command: "echo hi from a generated client" } },
});
const taskId = created.data?.task?.id ?? "";
const read = await ep.GET("/work/tasks/{task_id}", { params: { path: { task_id: taskId } } });
const command: unknown = read.data?.task?.input?.command;
const task = read.data?.task;
const seen = { created: created.response.status, taskId, status: task?.status, runtime: task?.runtime, command };
console.log(JSON.stringify(seen));
`;

const TSCONFIG = JSON.stringify({
  // no @types/node: the program uses fetch and console, which the DOM library declares
  compilerOptions: {
    strict: true,
    target: "es2022",
    module: "nodenext",
    moduleResolution: "nodenext",
    outDir: "out",
    types: [],
    lib: ["es2022", "dom"],
  },
  include: ["*.ts"],
});

let t: TestTower;
let dir: string;
beforeAll(async () => {
  t = await startTower();
  dir = mkdtempSync(join(tmpdir(), "ep-openapi-client-"));
  // the client's project resolves openapi-fetch where the integrators' tools are installed
  symlinkSync(INTEGRATORS_MODULES, join(dir, "node_modules"));
  writeFileSync(join(dir, "package.json"), '{"type": "module"}');
  writeFileSync(join(dir, "tsconfig.json"), TSCONFIG);
});
afterAll(async () => {
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(generator.skip || tsc.skip)("a REST client generated from /openapi.json", () => {
  beforeAll(async () => {
    writeFileSync(join(dir, "openapi.json"), await (await fetch(`${t.url}/openapi.json`)).text());
    const generated = await run([generator.require(), join(dir, "openapi.json"), "-o", join(dir, "ep-api.d.ts")]);
    expect(generated.code, generated.out).toBe(0);
  }, 60_000);

  it("type-checks with strict, sets input.command, and creates and reads back a shell task", async () => {
    const compiler = tsc.require();
    writeFileSync(join(dir, "client.ts"), client(t.url, t.adminToken));
    const checked = await run([compiler, "-p", dir]);
    expect(checked.out).toBe("");
    expect(checked.code).toBe(0);

    const ran = await run([join(dir, "out", "client.js")]);
    expect(ran.code, ran.out).toBe(0);
    const result = JSON.parse(ran.out) as {
      created: number;
      taskId: string;
      status: string;
      runtime: string;
      command: string;
    };
    expect(result).toEqual({
      created: 201,
      taskId: expect.stringMatching(/^tsk_/),
      status: "queued",
      runtime: "shell",
      command: "echo hi from a generated client",
    });
    expect((await t.api("GET", `/work/tasks/${result.taskId}`)).body.task.input).toEqual({
      command: "echo hi from a generated client",
    });
  }, 120_000);

  it("is strict for real: a runtime word the contract does not have fails the type-check", async () => {
    const compiler = tsc.require();
    writeFileSync(join(dir, "client.ts"), client(t.url, t.adminToken).replace('runtime: "shell"', 'runtime: "bash"'));
    const checked = await run([compiler, "-p", dir]);
    expect(checked.code).not.toBe(0);
    expect(checked.out).toMatch(/client\.ts\(\d+,\d+\): error TS2322: Type '"bash"' is not assignable/);
  }, 120_000);
});
