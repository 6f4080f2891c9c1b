// A confined run, through a real tower and epd (issue 34): the shell runtime with permission =
// "workspace" runs its command inside bubblewrap. From inside, EP's own files (the CLI's
// credentials, the tower's admin token, the node identity, another run's directory) cannot be
// read, a write outside the workspace fails, and the run's own doors stay open (`epd get-secret`
// through the secrets socket). Without bwrap on epd's PATH the run fails naming the package, and
// `ep system doctor` says so. A cancelled confined run leaves no process behind.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecretService } from "../gen/ep/tower/v1/secrets_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { Runtime, TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { ep } from "./cli-helpers.js";
import { registerNode, spawnEpd, spawnTowerProcess, type EpdProcess, type TowerProcess } from "./epd-harness.js";
import { tempHome, waitFor } from "./harness.js";
import { optionalTool } from "./optional-tools.js";

const bwrap = optionalTool("bwrap", { pkg: "bubblewrap", suite: "confined runs" });
const h = tempHome("ep-confine-");
// the user's home outside /tmp, as a node's is: /tmp itself stays writable to a run
const userHome = mkdtempSync(join(homedir(), ".ep-confine-user-"));
let tower: TowerProcess;
let epd: EpdProcess;
let work: ReturnType<typeof createClient<typeof WorkService>>;
let missionId = "";
let domainId = "";
const nodeFile = join(h.dir, "node.json");

async function run(command: string): Promise<{ id: string; status: TaskStatus; output: string; error: string }> {
  const id = (
    await work.createTask({ missionId, title: "confined", runtime: Runtime.SHELL, input: { command }, maxAttempts: 1 })
  ).task!.id;
  let t = (await work.getTask({ taskId: id })).task!;
  await waitFor(async () => {
    t = (await work.getTask({ taskId: id })).task!;
    return [TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.CANCELLED].includes(t.status);
  }, 30_000);
  return { id, status: t.status, output: t.result?.output ?? "", error: t.result?.error ?? "" };
}

beforeAll(async () => {
  if (bwrap.skip) return;
  bwrap.require();
  tower = await spawnTowerProcess(h.dir);
  await registerNode(tower.url, tower.adminToken, nodeFile);
  mkdirSync(join(h.dir, "epd"), { recursive: true, mode: 0o700 });
  writeFileSync(join(h.dir, "epd", "runtimes.toml"), '[shell]\npermission = "workspace"\n');
  // the CLI's stored credentials, as `ep login` leaves them
  mkdirSync(join(h.dir, "cli"), { recursive: true });
  writeFileSync(join(h.dir, "cli", "credentials.json"), '{"token":"cli-secret-token"}\n', { mode: 0o600 });
  epd = await spawnEpd({ home: h.dir, nodeFile, backendUrl: tower.url, env: { HOME: userHome } });
  const transport = createConnectTransport({
    baseUrl: tower.url,
    httpVersion: "1.1",
    interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${tower.adminToken}`), next(req))],
  });
  work = createClient(WorkService, transport);
  domainId = (await work.createDomain({ name: "confined" })).domain!.id;
  missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;
  const agentId = (await epd.call<{ agent: { id: string } }>("agent.enroll", { domainId, runtime: "shell" })).agent.id;
  const secrets = createClient(SecretService, transport);
  await secrets.setSecret({ name: "DB_PASSWORD", value: "s3cret-value" });
  await secrets.grantSecret({ name: "DB_PASSWORD", agentId });
}, 60_000);

afterAll(async () => {
  await epd?.stop();
  await tower?.stop();
  h.cleanup();
  rmSync(userHome, { recursive: true, force: true });
});

describe.skipIf(bwrap.skip)("a confined run", () => {
  it("cannot read EP's own files, cannot write outside its workspace, and still reads its secret", async () => {
    const first = await run("echo mine > scratch.txt; pwd");
    expect(first.status, first.error).toBe(TaskStatus.SUCCEEDED);
    const otherRun = first.output.trim();
    const r = await run(
      [
        `cat ${join(h.dir, "cli", "credentials.json")} && echo LEAK-cli`,
        `cat ${join(h.dir, "tower", "admin.token")} && echo LEAK-admin`,
        `cat ${nodeFile} && echo LEAK-node`,
        `ls ${otherRun} && cat ${join(otherRun, "scratch.txt")} && echo LEAK-run`,
        `echo x > ${join(userHome, "outside.txt")} || echo home-refused`,
        // the covers cannot be taken off from inside
        `umount ${h.dir} 2>/dev/null; mount -o remount,rw / 2>/dev/null; cat ${nodeFile} && echo LEAK-umount`,
        "echo inside > mine.txt && cat mine.txt",
        'v=$(epd get-secret DB_PASSWORD) && echo "secret-ok ${#v}"',
      ].join("; "),
    );
    expect(r.status, r.error).toBe(TaskStatus.SUCCEEDED);
    expect(r.output).not.toMatch(/LEAK|cli-secret-token/);
    expect(r.output).not.toContain(tower.adminToken);
    expect(readFileSync(nodeFile, "utf8")).not.toBe(""); // it is there, only not for the run
    expect(r.output).toContain("home-refused");
    expect(existsSync(join(userHome, "outside.txt"))).toBe(false);
    expect(r.output).toContain("inside");
    expect(r.output).toContain("secret-ok 12");
  }, 60_000);

  it("in a worktree: its own commits land on its branch; " +
    "main and the repository's config stay out of reach", async () => {
    const repo = join(userHome, "repo");
    const git = (...args: string[]) => execFileSync("git", ["-C", repo, ...args], { encoding: "utf8" }).trim();
    mkdirSync(repo, { recursive: true });
    git("init", "-q", "-b", "main");
    writeFileSync(join(repo, "README.md"), "r\n");
    git("add", "README.md");
    git("-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "start");
    const main = git("rev-parse", "main");
    const id = (
      await work.createTask({
        missionId,
        title: "commits",
        runtime: Runtime.SHELL,
        maxAttempts: 1,
        input: {
          workspace: { repo },
          command: [
            "echo a > a.txt && git add a.txt && git commit -qm agent-commit && echo committed",
            "git update-ref refs/heads/main HEAD 2>/dev/null || echo main-refused",
            `git -C ${repo} config user.name someone-else 2>/dev/null || echo config-refused`,
          ].join("; "),
        },
      })
    ).task!.id;
    let t = (await work.getTask({ taskId: id })).task!;
    await waitFor(
      async () =>
        [TaskStatus.SUCCEEDED, TaskStatus.FAILED].includes((t = (await work.getTask({ taskId: id })).task!).status),
      30_000,
    );
    expect(t.status, t.result?.error).toBe(TaskStatus.SUCCEEDED);
    expect(t.result?.output).toContain("committed");
    expect(t.result?.output).toContain("main-refused");
    expect(t.result?.output).toContain("config-refused");
    expect(git("rev-parse", "main")).toBe(main);
    expect(git("log", "--format=%s", `ep/${id}`)).toContain("agent-commit");
  }, 60_000);

  it("a cancelled run leaves no process behind", async () => {
    const marker = `sleep 31${Math.floor(Math.random() * 1000)}`;
    const id = (
      await work.createTask({
        missionId,
        title: "hang",
        runtime: Runtime.SHELL,
        input: { command: `${marker} & ${marker}; wait` },
        maxAttempts: 1,
      })
    ).task!.id;
    const alive = () =>
      execFileSync("ps", ["-eo", "args"], { encoding: "utf8" })
        .split("\n")
        .filter((l) => l.trim() === marker).length;
    await waitFor(() => alive() === 2, 20_000);
    await work.cancelTask({ taskId: id });
    await waitFor(() => alive() === 0, 20_000);
  }, 60_000);

  it("without bwrap on epd's PATH the run fails naming the package, and doctor says so", async () => {
    await epd.stop();
    // a PATH with bash and node but no bwrap
    const bin = join(h.dir, "bin-no-bwrap");
    mkdirSync(bin, { recursive: true });
    for (const tool of ["bash", "sh", "node", "cat", "ls"])
      if (!existsSync(join(bin, tool)))
        symlinkSync(execFileSync("which", [tool], { encoding: "utf8" }).trim(), join(bin, tool));
    epd = await spawnEpd({ home: h.dir, nodeFile, backendUrl: tower.url, env: { HOME: userHome, PATH: bin } });
    const r = await run("echo never");
    expect(r.status).toBe(TaskStatus.FAILED);
    expect(r.error).toContain("bubblewrap is not installed");
    expect(r.error).toContain("apt-get install bubblewrap");
    expect(r.error).toContain('permission = "unconfined"');
    const doctor = await ep(["system", "doctor", "--json"], {
      env: { EP_HOME: h.dir, EP_BASE_URL: tower.url, EP_TOKEN: tower.adminToken, EP_NODE_FILE: nodeFile },
    });
    const check = (doctor.json().checks as { check: string; ok: boolean; hint?: string; detail: string }[]).find(
      (c) => c.check === "confinement",
    );
    expect(check, doctor.stdout).toMatchObject({
      ok: false,
      hint: expect.stringContaining("apt-get install bubblewrap"),
    });
    expect(check!.detail).toContain("as epd sees it");
  }, 60_000);
});
