// The built `ep` on its success paths against the built ep-tower and a real epd: the mesh tools
// through `ep run`, the AI console with the heuristic planner and `ep approvals`, and every
// command's --json (snake_case field names throughout).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { COMMANDS } from "../cli/registry.js";
import { registerNode, ROOT, spawnEpd, spawnTowerProcess, type EpdProcess, type TowerProcess } from "./epd-harness.js";
import { spawn } from "node:child_process";
import { buildAll, buildCli, type EpResult } from "./fleet-harness.js";
import { assertBuilt, EP_BIN } from "./cli-helpers.js";
import { tempHome, waitFor } from "./harness.js";

let home: string;
let tower: TowerProcess;
let epd: EpdProcess;
let env: Record<string, string>;
const cleanups: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  assertBuilt();
  await buildAll();
  const h = tempHome("ep-cli-flows-");
  home = h.dir;
  cleanups.push(() => h.cleanup());
  tower = await spawnTowerProcess(home);
  cleanups.push(() => tower.stop());
  const nodeFile = join(home, "etc", "node.json");
  await registerNode(tower.url, tower.adminToken, nodeFile, "flows-node");
  mkdirSync(join(home, "epd"), { recursive: true, mode: 0o700 });
  // a supervised profile and a cron job, so the supervise and cron commands have something to show
  writeFileSync(
    join(home, "epd", "agents.toml"),
    `[[agent]]\nid = "svc"\nruntime = "shell"\ncommand = ["sleep", "300"]\nsupervise = true\n`,
  );
  writeFileSync(
    join(home, "epd", "cron.toml"),
    `[[job]]\nname = "nightly"\nschedule = "0 3 * * *"\ndispatch = "bash"\nprompt = "echo nightly"\n`,
  );
  epd = await spawnEpd({
    home,
    nodeFile,
    backendUrl: tower.url,
    env: { EP_SUPERVISE_BACKEND: "process", EP_NO_SYSTEMD: "1" },
  });
  cleanups.push(() => epd.stop());
  env = { EP_BASE_URL: tower.url, EP_TOKEN: tower.adminToken, EP_NODE_FILE: nodeFile, EP_NO_SYSTEMD: "1" };
}, 120_000);

afterAll(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

/** The built CLI (bundled from this tree) with EP_HOME = epHome; an "" value in extra unsets that variable. */
async function ep(args: string[], extra: Record<string, string> = {}, epHome = home, input = ""): Promise<EpResult> {
  // `ep daemon up` starts the epd bundled beside the CLI: use the built package (npm run build) for it
  const cli = args[0] === "daemon" && ["up", "logs", "down"].includes(args[1]) ? EP_BIN : await buildCli();
  const childEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...process.env, EP_HOME: epHome, ...env, ...extra })) if (v) childEnv[k] = v;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cli, ...args], { env: childEnv, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr, json: () => JSON.parse(stdout) }));
    child.stdin.end(input);
  });
}

async function ok(args: string[], extra: Record<string, string> = {}, epHome = home): Promise<EpResult> {
  const r = await ep(args, extra, epHome);
  expect(r.code, `ep ${args.join(" ")}: ${r.stderr}`).toBe(0);
  return r;
}

async function taskStatus(id: string, statuses: string[]): Promise<any> {
  let task: any;
  await waitFor(async () => {
    task = (await ok(["task", "get", id, "--json"])).json().task;
    return statuses.includes(task.status);
  }, 20_000).catch(() => {
    throw new Error(`task ${id} stayed ${task?.status}, wanted ${statuses.join("|")}`);
  });
  return task;
}

describe("ep run: the mesh tools through the daemon", () => {
  it("submit_mesh_task queues work an enrolled agent runs; retry_mesh_task " +
    "requeues a failure; claim_mesh_task takes the next task for an agent", async () => {
    const domainId = (await ok(["domain", "create", "mesh", "--json"])).json().domain.id;
    const missionId = (await ok(["mission", "create", "--domain", domainId, "Mesh", "--json"])).json().mission.id;

    const sub = await ok([
      "run",
      "submit_mesh_task",
      "--domain",
      domainId,
      "--arg",
      `mission_id=${missionId}`,
      "--arg",
      "title=from the cli",
      "--arg",
      "runtime=shell",
      "--arg",
      'input={"command":"echo mesh-ok"}',
      "--json",
    ]);
    const submitted = sub.json();
    expect(submitted).toMatchObject({
      short_circuited: false,
      result: {
        task: {
          status: "queued",
          title: "from the cli",
          runtime: "shell",
          mission_id: missionId,
          input: { command: "echo mesh-ok" },
        },
      },
    });
    const taskId = submitted.result.task.id as string;

    // an agent enrolled through the CLI runs it
    const agent = (
      await ok(["daemon", "agent", "enroll", "--domain", domainId, "--runtime", "shell", "--name", "mesh-1", "--json"])
    ).json().agent;
    expect(agent).toMatchObject({ name: "mesh-1", domain_id: domainId, runtime: "shell" });
    const done = await taskStatus(taskId, ["succeeded", "failed"]);
    expect(done).toMatchObject({
      status: "succeeded",
      claimed_by: agent.id,
      attempts: 1,
      result: { output: "mesh-ok\n", exit_code: 0 },
    });

    // human output: the tool's answer as JSON; --args-json works too
    const runs = join(home, "failing-runs");
    const human = await ok([
      "run",
      "submit_mesh_task",
      "--domain",
      domainId,
      "--args-json",
      JSON.stringify({
        mission_id: missionId,
        title: "fails",
        runtime: "shell",
        input: { command: `echo run >> ${runs}; exit 3` },
      }),
    ]);
    const failingId = /"id": "(tsk_\w+)"/.exec(human.stdout)![1];
    const failed = await taskStatus(failingId, ["failed", "succeeded"]);
    expect(failed).toMatchObject({ status: "failed", attempts: 1, result: { exit_code: 3 } });
    const retried = await ok([
      "run",
      "retry_mesh_task",
      "--domain",
      domainId,
      "--arg",
      `task_id=${failingId}`,
      "--json",
    ]);
    expect(retried.json().result.task).toMatchObject({ id: failingId, status: "queued" });
    await waitFor(() => existsSync(runs) && readFileSync(runs, "utf8") === "run\nrun\n", 20_000);
    const again = await taskStatus(failingId, ["failed", "succeeded"]);
    expect(again).toMatchObject({ status: "failed", attempts: 1, result: { exit_code: 3 } });

    // claim_mesh_task: while the agent is busy, a new task is claimed for it through the tool
    const long = (
      await ok(["task", "submit", "--mission", missionId, "busy", "--command", "sleep 4; echo long", "--json"])
    ).json().task.id as string;
    await taskStatus(long, ["running"]);
    const next = (
      await ok(["task", "submit", "--mission", missionId, "next", "--command", "echo next", "--json"])
    ).json().task.id as string;
    const claimed = await ok([
      "run",
      "claim_mesh_task",
      "--domain",
      domainId,
      "--arg",
      `agent_id=${agent.id}`,
      "--json",
    ]);
    expect(claimed.json().result.task).toMatchObject({ id: next, status: "claimed", claimed_by: agent.id });
    expect((await ok(["task", "get", next, "--json"])).json().task).toMatchObject({
      status: "claimed",
      claimed_by: agent.id,
    });
    // nothing else queued: an empty claim
    expect(
      (await ok(["run", "claim_mesh_task", "--domain", domainId, "--arg", `agent_id=${agent.id}`, "--json"])).json()
        .result.task ?? null,
    ).toBeNull();
    await ok(["task", "cancel", next, "--reason", "claimed by the test"]);
    await taskStatus(long, ["succeeded"]);

    // bad input: the tool's schema names the field, exit 2
    const bad = await ep(["run", "submit_mesh_task", "--domain", domainId, "--arg", "title=x"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/mission_id/);
  }, 90_000);
});

describe("ep ai chat and ep approvals with the heuristic planner", () => {
  it("a chat proposes; the CLI approves or rejects; approved writes exist afterwards", async () => {
    const first = await ok(["ai", "chat", 'create domain "acme-ai"', "--json"]);
    const turn = first.json();
    const sessionId = turn.session_id as string;
    expect(sessionId).toMatch(/^ses_/);
    expect(turn.actions).toEqual([
      expect.objectContaining({
        session_id: sessionId,
        tool: "create_domain",
        status: "pending",
        arguments: { name: "acme-ai" },
      }),
    ]);
    expect(turn.reply.tool_calls).toEqual([
      expect.objectContaining({ tool: "create_domain", action_id: turn.actions[0].id }),
    ]);
    // nothing changed yet
    expect((await ok(["domain", "ls", "--json"])).json().domains.map((d: any) => d.name)).not.toContain("acme-ai");

    const pending = (await ok(["approvals", "ls", "--json"])).json().actions;
    expect(pending).toEqual([
      expect.objectContaining({ id: turn.actions[0].id, session_id: sessionId, tool: "create_domain" }),
    ]);
    const listed = await ok(["approvals", "ls"]);
    expect(listed.stdout).toMatch(
      new RegExp(
        `^ID\\s+KIND\\s+WHAT\\s+FOR\\s+CREATED\\s+EXPIRES\\n${turn.actions[0].id}\\s+action\\s+Create ` +
          `domain "acme-ai"\\s+session "`,
      ),
    );

    const approved = (await ok(["approvals", "approve", sessionId, turn.actions[0].id, "--json"])).json().action;
    expect(approved).toMatchObject({ status: "approved", result: { domain: { name: "acme-ai" } } });
    const domainId = approved.result.domain.id as string;
    expect((await ok(["domain", "ls", "--json"])).json().domains).toContainEqual(
      expect.objectContaining({ id: domainId, name: "acme-ai" }),
    );

    // the same session, human output: the reply names the commands that decide
    const mission = await ok(["ai", "chat", "--session", sessionId, 'create mission "Launch" in domain acme-ai']);
    // the action's id alone decides it (ep approvals finds its session)
    const decide = new RegExp(
      String.raw`pending action (act_\w+): Create mission "Launch" .* ` +
        String.raw`approve with 'ep approvals approve (act_\w+)' or reject with 'ep approvals reject \2'`,
    );
    const m = decide.exec(mission.stdout);
    expect(m, mission.stdout).not.toBeNull();
    expect(m![2]).toBe(m![1]);
    expect((await ok(["mission", "ls", "--domain", domainId, "--json"])).json().missions).toEqual([]);
    const decided = await ok(["approvals", "approve", sessionId, m![1]]);
    expect(decided.stdout).toMatch(new RegExp(`^action ${m![1]} approved\\n`));
    expect((await ok(["mission", "ls", "--domain", domainId, "--json"])).json().missions).toEqual([
      expect.objectContaining({ title: "Launch", domain_id: domainId }),
    ]);

    // a rejected proposal changes nothing and cannot be approved afterwards
    const third = (await ok(["ai", "chat", "--session", sessionId, 'create domain "never"', "--json"])).json();
    const rejected = await ok(["approvals", "reject", sessionId, third.actions[0].id]);
    expect(rejected.stdout).toBe(`action ${third.actions[0].id} rejected\n`);
    const late = await ep(["approvals", "approve", sessionId, third.actions[0].id]);
    expect(late.code).toBe(5);
    expect(late.stderr).toMatch(/^ep: action \S+ was already rejected/);
    expect((await ok(["domain", "ls", "--json"])).json().domains.map((d: any) => d.name)).not.toContain("never");
    expect((await ok(["approvals", "ls"])).stdout).toBe("(none)\n");
  }, 60_000);
});

/** Every object key in a JSON value that is not snake_case (lowerCamelCase, say), with its path. */
function camelKeys(value: unknown, path = "$"): string[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => camelKeys(v, `${path}[${i}]`));
  if (value === null || typeof value !== "object") return [];
  return Object.entries(value).flatMap(([k, v]) => [
    ...(/[a-z][A-Z]/.test(k) ? [`${path}.${k}`] : []),
    ...camelKeys(v, `${path}.${k}`),
  ]);
}

// Commands whose --json is not a single JSON document, or that do not return (interactive, foreground).
const NOT_JSON: Record<string, string> = {
  "agent attach": "interactive terminal session",
  completion: "prints a shell script",
  up: "runs the tower and the daemon in the foreground",
};
const CAMEL_ELSEWHERE: Record<string, string[]> = {};

describe("--json", () => {
  it("every command prints snake_case JSON (errors too)", async () => {
    const seen = new Set<string>();
    const check = async (
      name: string,
      args: string[],
      opts: { codes?: number[]; lines?: boolean; input?: string; env?: Record<string, string>; home?: string } = {},
    ) => {
      seen.add(name);
      const r = await ep([...args, "--json"], opts.env, opts.home, opts.input);
      expect(opts.codes ?? [0], `ep ${args.join(" ")} --json: ${r.stderr}`).toContain(r.code);
      const docs = opts.lines
        ? r.stdout
            .trim()
            .split("\n")
            .filter(Boolean)
            .map((l) => JSON.parse(l) as unknown)
        : [r.json() as unknown];
      expect(docs.length, name).toBeGreaterThan(0);
      const camel = docs.flatMap((d) => camelKeys(d));
      expect(camel, `ep ${args.join(" ")} --json`).toEqual(CAMEL_ELSEWHERE[name] ?? []);
      return docs[0] as any;
    };

    const domainId = (await check("domain create", ["domain", "create", "json"])).domain.id as string;
    await check("domain ls", ["domain", "ls"]);
    const missionId = (await check("mission create", ["mission", "create", "--domain", domainId, "J"])).mission
      .id as string;
    expect((await check("mission get", ["mission", "get", missionId])).mission.id).toBe(missionId);
    await check("mission ls", ["mission", "ls", "--domain", domainId]);
    const taskId = (
      await check("task submit", [
        "task",
        "submit",
        "--mission",
        missionId,
        "t",
        "--command",
        "exit 0",
        "--capability",
        "gpu",
      ])
    ).task.id as string;
    await check("task ls", ["task", "ls", "--mission", missionId]);
    await check("task get", ["task", "get", taskId]);
    await check("task cancel", ["task", "cancel", taskId]);
    // cancelled: replays, then the task
    await check("task watch", ["task", "watch", taskId], { lines: true, codes: [1] });
    await check("task retry", ["task", "retry", taskId]);
    const piped = await check("pipeline run", ["pipeline", "run", "-", "--domain", domainId], {
      input: '[[step]]\nname = "only"\ncommand = "true"\n',
    });
    expect((await check("pipeline get", ["pipeline", "get", piped.mission.id])).steps[0].step).toBe("only");
    await check("task get", ["task", "get", "tsk_missing"], { codes: [4] }); // the error document
    await check("task diff", ["task", "diff", taskId], { codes: [4] }); // no workspace: the error document
    await check("task merge", ["task", "merge", taskId], { codes: [5] }); // not succeeded: the error document
    await check("workspace ls", ["workspace", "ls"]);
    await check("workspace gc", ["workspace", "gc"]);
    await check("workspace rm", ["workspace", "rm", "tsk_missing"], { codes: [4] });
    await check("agent ls", ["agent", "ls"]);
    await check("node ls", ["node", "ls"]);
    const nodeId = (await ep(["node", "ls", "--json"])).json().nodes[0].id as string;
    const served = (await check("node domains set", ["node", "domains", "set", nodeId, "--all"])) as {
      domains: string[];
    };
    expect(served.domains).toEqual(["*"]);
    expect((await check("ui", ["ui"])).login_link).toMatch(/\/ui\/login#ticket=tkt_/);
    await check("node reload", ["node", "reload", nodeId], { codes: [0, 2] });

    const agent = (
      await check("daemon agent enroll", ["daemon", "agent", "enroll", "--domain", domainId, "--runtime", "shell"])
    ).agent;
    expect((await check("agent get", ["agent", "get", agent.id])).agent.id).toBe(agent.id);
    await check("run", ["run", "claim_mesh_task", "--domain", domainId, "--arg", `agent_id=${agent.id}`]);
    await check("agent signal", ["agent", "signal", "svc", "echo hi"]);
    await check("agent cron list", ["agent", "cron", "list"]);
    await check("agent cron describe", ["agent", "cron", "describe", "nightly"]);
    await check("agent cron history", ["agent", "cron", "history", "nightly"]);
    await check("agent cron reload", ["agent", "cron", "reload"]);
    await check("agent cron gc-now", ["agent", "cron", "gc-now"]);
    await waitFor(async () => (await ep(["agent", "supervise", "list", "--json"])).json().agents?.length === 1, 10_000);
    await check("agent supervise list", ["agent", "supervise", "list"]);
    await check("agent supervise status", ["agent", "supervise", "status", "svc"]);
    await check("agent supervise pause", ["agent", "supervise", "pause", "svc"]);
    await check("agent supervise resume", ["agent", "supervise", "resume", "svc"]);
    await check("agent supervise restart", ["agent", "supervise", "restart", "svc"]);
    await check("daemon status", ["daemon", "status"]);
    await check("system doctor", ["system", "doctor"], { codes: [0, 1] });

    const chat = await check("ai chat", ["ai", "chat", 'create domain "json-ai"']);
    await check("approvals ls", ["approvals", "ls"]);
    await check("approvals approve", ["approvals", "approve", chat.session_id, chat.actions[0].id]);
    const chat2 = await check("ai chat", ["ai", "chat", "--session", chat.session_id, 'create domain "json-no"']);
    await check("approvals reject", ["approvals", "reject", chat.session_id, chat2.actions[0].id]);
    await check("events tail", ["events", "tail", "--since", "0", "--limit", "20"], { lines: true });

    await check("secret set", ["secret", "set", "JSON_SECRET"], { input: "s3cret\n" });
    await check("secret ls", ["secret", "ls"]);
    await check("secret grant", ["secret", "grant", "JSON_SECRET", "--domain", domainId]);
    await check("secret revoke", ["secret", "revoke", "JSON_SECRET", "--domain", domainId]);
    await check("secret rm", ["secret", "rm", "JSON_SECRET"]);
    const hook = (
      await check("webhook add", [
        "webhook",
        "add",
        "http://127.0.0.1:9/json",
        "--domain",
        domainId,
        "--event",
        "task.failed",
      ])
    ).webhook;
    await check("webhook ls", ["webhook", "ls", "--domain", domainId]);
    // nothing listens on port 9
    await check("webhook test", ["webhook", "test", hook.id, "--domain", domainId], { codes: [1] });
    await check("webhook deliveries", ["webhook", "deliveries", hook.id, "--domain", domainId]);
    await check("webhook rm", ["webhook", "rm", hook.id, "--domain", domainId]);
    const created = await check("token create", ["token", "create", "--name", "json", "--role", "viewer"]);
    await check("token ls", ["token", "ls"]);
    await check("whoami", ["whoami"]);
    await check("version", ["version"]);

    // a second home: login/logout, node registration and a detached daemon of its own
    const other = tempHome("ep-cli-json-");
    cleanups.push(() => other.cleanup());
    const otherEnv = { EP_NODE_FILE: join(other.dir, "node.json"), EP_TOKEN: "", EP_BASE_URL: "" };
    await check("login", ["login", "--url", tower.url, "--token", created.secret], { env: otherEnv, home: other.dir });
    await check("logout", ["logout"], { env: otherEnv, home: other.dir });
    await check("token revoke", ["token", "revoke", created.token.id]);
    const daemonEnv = { EP_NODE_FILE: join(other.dir, "node.json") };
    await check("agent node register", ["agent", "node", "register", "--hostname", "json-node"], {
      env: daemonEnv,
      home: other.dir,
    });
    await check("daemon", ["daemon", "--booster-wasm", join(ROOT, "daemon", "booster", "default-booster.wasm")], {
      env: daemonEnv,
      home: other.dir,
    });
    cleanups.push(async () => void (await ep(["daemon", "down"], daemonEnv, other.dir)));
    await check("daemon up", ["daemon", "up"], { env: daemonEnv, home: other.dir });
    await check("daemon logs", ["daemon", "logs", "-n", "5"], { env: daemonEnv, home: other.dir, lines: true });
    await check("daemon down", ["daemon", "down"], { env: daemonEnv, home: other.dir });

    // every command of the registry was checked (or is listed above with the reason it is not)
    const all = COMMANDS.map((c) => c.path.join(" ")).filter((n) => !NOT_JSON[n]);
    expect(all.filter((n) => !seen.has(n))).toEqual([]);
  }, 180_000);
});
