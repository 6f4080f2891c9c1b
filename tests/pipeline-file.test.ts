// Issue 40: a pipeline file that is wrong anywhere is refused naming its line, and nothing is
// created — through a real tower (Connect, REST) and the real `ep`. Cycles through names, unknown
// steps, missing fields, TOML syntax, a parent in another domain, a name taken in the mission.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { runtimeOf } from "../test-support/words.js";
import { assertBuilt, ep } from "./cli-helpers.js";
import { startTower, type TestTower } from "./harness.js";

let t: TestTower;
beforeAll(async () => {
  t = await startTower();
});
afterAll(async () => {
  await t?.close();
});

const work = () => t.client(WorkService);

/** The refusal's message (file:line: …), or a failure when the file was taken. */
async function refused(domainId: string, source: string, extra: { missionId?: string } = {}): Promise<string> {
  try {
    await work().runPipeline({ domainId, source, fileName: "p.toml", ...extra });
  } catch (err) {
    const e = ConnectError.from(err);
    expect(e.code).toBe(Code.InvalidArgument);
    return e.rawMessage;
  }
  throw new Error("the pipeline was accepted");
}

const step = (name: string, body: string) => `[[step]]\nname = "${name}"\n${body}\n`;

describe("a malformed pipeline file", () => {
  it("is refused naming each wrong line, and nothing is created", async () => {
    const { domain } = await work().createDomain({ name: "pipe-bad" });
    const d = domain!.id;
    const cases: [string, string][] = [
      // a cycle through names: reported at the depends_on line of a step in it
      [
        step("a", 'command = "x"\ndepends_on = ["c"]') +
          step("b", 'command = "x"\ndepends_on = ["a"]') +
          step("c", 'command = "x"\ndepends_on = ["b"]'),
        'p.toml:4: step "a": depends_on makes a cycle: a → c → b → a',
      ],
      [
        step("a", 'command = "x"') + step("b", 'command = "x"\ndepends_on = ["aa"]'),
        'p.toml:7: step "b": depends_on names unknown step "aa" (the steps are a, b;',
      ],
      [step("a", 'runtime = "shell"'), 'p.toml:3: step "a": missing field command (a shell step runs a command)'],
      ['[[step]]\ncommand = "x"\n', "p.toml:1: missing field name"],
      [step("a", ""), 'p.toml:1: step "a": missing field prompt or command'],
      [
        step("a", 'command = "x"\nmax_attempts = 0'),
        'p.toml:4: step "a": max_attempts must be between 1 and 100 (got 0)',
      ],
      [step("a", 'command = "x"\ncolour = "red"'), 'p.toml:4: step "a": unknown field "colour"'],
      [
        step("a", 'command = "x"') + step("a", 'command = "y"'),
        'p.toml:5: step "a": a second step named "a" (the first is on line 1)',
      ],
      [step("a", 'command = "x"\ndepends_on = "b"'), 'p.toml:4: step "a": depends_on must be a list of names'],
      [
        step("a", 'prompt = "x"\nworkspace = { repo = "/r", ref = "task:b" }') + step("b", 'command = "x"'),
        'p.toml:4: step "a": workspace.ref "task:b": the step must depend on "b"',
      ],
      [
        step("a", 'command = "x"\nclaim_policy = "everyone"'),
        'p.toml:4: step "a": claim_policy "everyone" is not one of first_claim, assigned, broadcast',
      ],
      ['name = "x"\n[[step]]\nname = "a"\ncommand = "unterminated\n', "p.toml:4: TOML syntax error"],
      ['title = "x"\n' + step("a", 'command = "x"'), 'p.toml:1: unknown key "title"'],
      ['name = "x"\n', "p.toml:1: no steps"],
      [step("a", 'agent = "nobody"\nprompt = "x"'), `p.toml:3: step "a": no agent "nobody" is enrolled in domain ${d}`],
    ];
    for (const [source, message] of cases) expect(await refused(d, source)).toContain(message);
    // several errors at once, each with its line, in line order
    const many = await refused(d, step("a", 'command = "x"\ndepends_on = ["zz"]') + step("b", 'runtime = "shell"'));
    expect(many.split("\n")).toEqual([
      expect.stringContaining('p.toml:4: step "a": depends_on names unknown step "zz"'),
      expect.stringContaining('p.toml:7: step "b": missing field command'),
    ]);
    expect((await work().listMissions({ domainId: d })).missions).toEqual([]);
  });

  it("is refused when a step depends on a task of another domain, naming the line; no mission, no task", async () => {
    const { domain: mine } = await work().createDomain({ name: "pipe-mine" });
    const { domain: theirs } = await work().createDomain({ name: "pipe-theirs" });
    const { mission } = await work().createMission({ domainId: theirs!.id, title: "m" });
    const foreign = (await work().createTask({ missionId: mission!.id, title: "x" })).task!;
    const message = await refused(
      mine!.id,
      step("a", 'command = "x"') + step("b", `command = "x"\ndepends_on = ["a", "${foreign.id}"]`),
    );
    expect(message).toBe(
      `p.toml:7: step "b": depends_on[1]: task ${foreign.id} is in domain ` +
        `${theirs!.id}, not ${mine!.id}; a task depends only on tasks of its own domain`,
    );
    expect((await work().listMissions({ domainId: mine!.id })).missions).toEqual([]);
    // over REST: 400, the errors listed with their lines
    const rest = await t.api("POST", `/domains/${mine!.id}/pipelines`, {
      source: step("a", 'command = "x"\ndepends_on = ["nope"]'),
      file_name: "p.toml",
    });
    expect(rest.status).toBe(400);
    expect(rest.body.error).toMatchObject({
      code: "pipeline_invalid",
      details: { file: "p.toml", errors: [{ line: 4, step: "a", field: "depends_on" }] },
    });
    const wrongType = await t.api("POST", `/domains/${mine!.id}/pipelines`, { source: 7 });
    expect(wrongType.status).toBe(400);
    expect((await work().listMissions({ domainId: mine!.id })).missions).toEqual([]);
  });

  it("added to a mission that has a step of the same name is refused; a good file into it is taken", async () => {
    const { domain } = await work().createDomain({ name: "pipe-again" });
    await t.client(AgentService).enrollAgent({ domainId: domain!.id, runtime: runtimeOf("shell"), name: "runner" });
    const first = await work().runPipeline({
      domainId: domain!.id,
      source: step("build", 'command = "make"\nagent = "runner"'),
      title: "release",
    });
    expect(first.mission!.title).toBe("release");
    expect(first.steps[0]!.assigneeAgentId).not.toBe("");
    const missionId = first.mission!.id;
    expect(await refused(domain!.id, step("build", 'command = "make again"'), { missionId })).toContain(
      `p.toml:2: step "build": mission ${missionId} has a step "build" already`,
    );
    const second = await work().runPipeline({
      domainId: domain!.id,
      missionId,
      source: step("test", `command = "make test"\ndepends_on = ["${first.steps[0]!.id}"]`),
    });
    expect(second.steps.map((s) => [s.step, s.dependsOn])).toEqual([["test", [first.steps[0]!.id]]]);
    expect((await work().getPipeline({ missionId })).steps.map((s) => s.step)).toEqual(["build", "test"]);
  });

  it("through ep pipeline run: the refusal on stderr naming the file's line, exit 2, nothing created", async () => {
    assertBuilt();
    const { domain } = await work().createDomain({ name: "pipe-cli" });
    const file = join(t.home, "bad.toml");
    writeFileSync(file, step("a", 'command = "x"') + step("b", 'command = "x"\ndepends_on = ["a", "b"]'));
    const env = { EP_BASE_URL: t.url, EP_TOKEN: t.adminToken, EP_HOME: join(t.home, "cli") };
    const r = await ep(["pipeline", "run", file, "--domain", domain!.id], { env });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('bad.toml:7: step "b": a step cannot depend on itself');
    const missing = await ep(["pipeline", "run", join(t.home, "absent.toml"), "--domain", domain!.id], { env });
    expect([missing.code, missing.stderr]).toEqual([2, expect.stringContaining("cannot read")]);
    const noDomain = await ep(["pipeline", "run", file], { env });
    expect([noDomain.code, noDomain.stderr]).toEqual([2, expect.stringContaining("needs --domain")]);
    expect((await work().listMissions({ domainId: domain!.id })).missions).toEqual([]);
  });
});
