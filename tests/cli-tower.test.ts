// The built `ep` against a real tower: output (table and --json), exit codes, bad input.
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assertBuilt, ep } from "./cli-helpers.js";
import { freePort, spawnTower, startTower, tempHome, type TestTower } from "./harness.js";

let t: TestTower;
let home: string;
let env: Record<string, string>;

beforeAll(async () => {
  assertBuilt();
  home = tempHome("ep-cli-").dir;
  t = await startTower();
  env = { EP_HOME: home, EP_BASE_URL: t.url, EP_TOKEN: t.adminToken };
});
afterAll(async () => {
  await t?.close();
});

describe("ep against a tower", () => {
  it("creates and lists domains, missions and tasks, as tables and as JSON", async () => {
    const d = await ep(["domain", "create", "payments", "--json"], { env });
    expect(d.code).toBe(0);
    const domainId = d.json().domain.id as string;
    expect(domainId).toMatch(/^dom_/);

    const ls = await ep(["domain", "ls"], { env });
    expect(ls.code).toBe(0);
    expect(ls.stdout).toMatch(/^NAME\s+CREATED/);
    expect(ls.stdout).toContain("payments");

    const m = await ep(["mission", "create", "--domain", domainId, "Ship", "v2"], { env });
    expect(m.code).toBe(0);
    const missionId = /msn_\w+/.exec(m.stdout)![0];
    expect((await ep(["mission", "ls", "--json"], { env })).json().missions).toEqual([
      expect.objectContaining({ id: missionId, title: "Ship v2", domain_id: domainId }),
    ]);

    const sub = await ep(
      [
        "task",
        "submit",
        "--mission",
        missionId,
        "run tests",
        "--priority",
        "7",
        "--command",
        "echo hi",
        "--capability",
        "bash",
        "--json",
      ],
      { env },
    );
    expect(sub.code).toBe(0);
    const task = sub.json().task;
    expect(task).toMatchObject({
      status: "queued",
      priority: 7,
      runtime: "shell",
      capabilities: ["bash"],
      input: { command: "echo hi" },
    });

    const get = await ep(["task", "get", task.id], { env });
    expect(get.stdout).toMatch(new RegExp(`id\\s+${task.id}`));
    expect(get.stdout).toMatch(/status\s+queued/);
    const tl = await ep(["task", "ls", "--mission", missionId], { env });
    expect(tl.stdout).toContain(task.id);

    // retry of a queued task is a conflict: exit 5
    const retry = await ep(["task", "retry", task.id], { env });
    expect(retry.code).toBe(5);
    expect(retry.stderr).toMatch(/^ep: /);

    const cancel = await ep(["task", "cancel", task.id, "--reason", "superseded"], { env });
    expect(cancel.code).toBe(0);
    expect(cancel.stdout).toContain("cancelled");
    const again = await ep(["task", "retry", task.id, "--json"], { env });
    expect(again.code).toBe(0);
    expect(again.json().task.status).toBe("queued");
  });

  it("maps errors to exit codes with a message and a hint", async () => {
    const missing = await ep(["task", "get", "tsk_nope"], { env });
    expect(missing.code).toBe(4);
    expect(missing.stderr).toMatch(/^ep: .*tsk_nope/m);

    const json = await ep(["task", "get", "tsk_nope", "--json"], { env });
    expect(JSON.parse(json.stdout).error.code).toBe("task_not_found");

    const badToken = await ep(["domain", "ls"], { env: { ...env, EP_TOKEN: "ept_wrong" } });
    expect(badToken.code).toBe(3);
    expect(badToken.stderr).toMatch(/hint: log in with 'ep login/);

    const down = await ep(["domain", "ls"], { env: { ...env, EP_BASE_URL: `http://127.0.0.1:${await freePort()}` } });
    expect(down.code).toBe(7);
    expect(down.stderr).toMatch(/hint: is the tower running/);
  });

  it("refuses bad input with exit 2 before calling the tower", async () => {
    const cases: [string[], RegExp][] = [
      [["task", "submit", "--mission", "msn_x", "t", "--priority", "high"], /--priority must be a 32-bit integer/],
      [["task", "ls"], /--mission is required/],
      [["domain", "create"], /needs <name>/],
      [["domain", "ls", "--bogus"], /Unknown option '--bogus'/],
      [["domain", "nope"], /unknown command 'ep domain nope'.*ls, create\)\nhint: see 'ep domain --help'/],
      // another CLI's word for a command gets its name here; the id after it is not part of the command
      [
        ["task", "show", "tsk_1"],
        /unknown command 'ep task show' \(commands under 'ep task': .*get.*\)\nhint: did you mean 'ep task get'\?/,
      ],
      [["bogus", "x"], /unknown command 'ep bogus x'\nhint: see 'ep --help'/],
      [["token", "create", "--name", "x", "--role", "viewer", "--ttl", "soon"], /--ttl must be a duration/],
      [["events", "tail", "--type", "weather"], /--type must be approval, inbox, matrix or progress/],
      [["run", "tool", "--domain", "d", "--arg", "novalue"], /--arg must be key=value/],
    ];
    for (const [args, msg] of cases) {
      const r = await ep(args, { env });
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr).toMatch(msg);
      expect(r.stderr).toMatch(/hint: /);
    }
  });

  it("every command answers --help with an example", async () => {
    const { COMMANDS } = await import("../cli/registry.js");
    for (const c of COMMANDS.slice(0, 60)) {
      const r = await ep([...c.path, "--help"], { env });
      expect(r.code, c.path.join(" ")).toBe(0);
      expect(r.stdout).toContain("Example:");
      expect(r.stdout).toContain(c.example);
    }
  }, 120_000);

  it("creates, lists and revokes tokens; login saves them 0600 and logout forgets them", async () => {
    const created = await ep(["token", "create", "--name", "ci", "--role", "viewer", "--ttl", "1d", "--json"], { env });
    expect(created.code).toBe(0);
    const { token, secret } = created.json();
    expect(token.role).toBe("viewer");
    expect((await ep(["token", "ls"], { env })).stdout).toContain(token.id);

    const cliHome = tempHome("ep-cli-login-").dir;
    const login = await ep(["login", "--url", t.url, "--token", secret], { env: { EP_HOME: cliHome } });
    expect(login.code).toBe(0);
    expect(login.stdout).toMatch(/logged in .* \(viewer\)/);
    const file = join(cliHome, "cli", "credentials.json");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(file, "utf8"))).toEqual({ url: t.url, token: secret });
    // later commands find the tower and the token in the saved credentials
    const who = await ep(["whoami", "--json"], { env: { EP_HOME: cliHome } });
    expect(who.json()).toMatchObject({ url: t.url, role: "viewer" });
    // a viewer may read but not create
    expect((await ep(["domain", "create", "x"], { env: { EP_HOME: cliHome } })).code).toBe(3);

    const badLogin = await ep(["login", "--url", t.url, "--token", "ept_nope"], { env: { EP_HOME: tempHome().dir } });
    expect(badLogin.code).toBe(3);

    expect((await ep(["token", "revoke", token.id], { env })).code).toBe(0);
    expect((await ep(["whoami"], { env: { EP_HOME: cliHome } })).code).toBe(3);
    const out = await ep(["logout"], { env: { EP_HOME: cliHome } });
    expect(out.stdout).toContain("removed");
  });

  it("registers a node and writes node.json 0600, or says clearly why it cannot", async () => {
    const nodeFile = join(home, "etc", "node.json");
    const r = await ep(["agent", "node", "register", "--hostname", "worker-7"], {
      env: { ...env, EP_NODE_FILE: nodeFile },
    });
    expect(r.code).toBe(0);
    const id = JSON.parse(readFileSync(nodeFile, "utf8"));
    expect(id).toMatchObject({ hostname: "worker-7", tower_url: expect.stringMatching(/^http/) });
    expect(id.node_id).toMatch(/^nod_/);
    expect(statSync(nodeFile).mode & 0o777).toBe(0o600);
    expect((await ep(["node", "ls"], { env })).stdout).toContain("worker-7");

    const blocker = join(home, "a-file");
    writeFileSync(blocker, "");
    const bad = await ep(["agent", "node", "register", "--hostname", "w"], {
      env: { ...env, EP_NODE_FILE: join(blocker, "node.json") },
    });
    expect(bad.code).toBe(3);
    expect(bad.stderr).toMatch(/cannot write the node identity file .*a-file is not a directory/);
    expect(bad.stderr).toMatch(/EP_NODE_FILE/);
    expect((await ep(["agent", "node", "register"], { env })).code).toBe(2);
  });

  it("stores secrets from stdin (never from an argument) and lists them without values", async () => {
    // the built ep-tower: its first start writes the secret-store key
    const towerHome = tempHome("ep-cli-secrets-").dir;
    const spawned = await spawnTower(towerHome);
    const env = { EP_HOME: towerHome, EP_BASE_URL: spawned.url };
    try {
      const set = await ep(["secret", "set", "DB_PASSWORD"], { env, input: "hunter2\n" });
      expect(set.code, set.stderr).toBe(0);
      const ls = await ep(["secret", "ls", "--json"], { env });
      expect(ls.stdout).not.toContain("hunter2");
      expect(ls.json().secrets).toEqual([expect.objectContaining({ name: "DB_PASSWORD" })]);
      expect((await ep(["secret", "set", "X", "value"], { env })).code).toBe(2);
      expect((await ep(["secret", "grant", "DB_PASSWORD"], { env })).stderr).toMatch(/exactly one of --agent/);
      expect((await ep(["secret", "rm", "DB_PASSWORD"], { env })).code).toBe(0);
    } finally {
      await spawned.stop();
    }
  });

  it("prints the version and completion scripts for bash, zsh and fish", async () => {
    const v = await ep(["version", "--json"], { env });
    expect(v.json().version).toMatch(/^\d+\.\d+\.\d+/);
    expect((await ep(["--version"])).stdout).toMatch(/^ep \d/);
    for (const shell of ["bash", "zsh", "fish"]) {
      const c = await ep(["completion", shell], { env });
      expect(c.code).toBe(0);
      expect(c.stdout).toContain("cron");
    }
    expect((await ep(["completion", "tcsh"], { env })).code).toBe(2);
  });

  it("the bash completion offers the next words", async () => {
    const script = (await ep(["completion", "bash"], { env })).stdout;
    const dir = join(home, "compl");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "ep.bash"), script);
    const { spawnSync } = await import("node:child_process");
    const r = spawnSync(
      "bash",
      [
        "-c",
        `source ${join(dir, "ep.bash")}; COMP_WORDS=(ep agent cron ""); COMP_CWORD=3; _ep; echo "\${COMPREPLY[*]}"`,
      ],
      { encoding: "utf8" },
    );
    expect(r.stdout.trim().split(" ").sort()).toEqual(["describe", "gc-now", "history", "list", "reload"]);
  });
});
