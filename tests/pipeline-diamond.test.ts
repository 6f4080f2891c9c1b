// Issue 40's diamond: A → B, C → D as shell steps of a pipeline file, through a real tower, a real
// epd with two shell agents and the real `ep` CLI. D runs only after B and C succeeded and reads
// both their outputs from its run directory; B failing cancels D naming B; `ep task retry` of B
// brings D back and the pipeline finishes.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { statusWord } from "../test-support/words.js";
import { assertBuilt, ep } from "./cli-helpers.js";
import { adminClient, epdFor, towerWithMission } from "./epd-harness.js";
import { useCleanups, waitFor } from "./harness.js";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";

const cleanup = useCleanups();

describe("a diamond pipeline of shell steps through a real epd", () => {
  it("runs D after B and C with both outputs; B failing cancels D; retrying B finishes the pipeline", async () => {
    assertBuilt();
    const s = await towerWithMission("ep-diamond-", cleanup);
    const epd = await epdFor(s, cleanup);
    for (const name of ["one", "two"]) await epd.call("agent.enroll", { domainId: s.domainId, runtime: "shell", name });
    const flags = join(s.home, "flags");
    mkdirSync(flags);
    const file = join(s.home, "diamond.toml");
    writeFileSync(
      file,
      [
        'name = "diamond"',
        "",
        "[[step]]",
        'name = "A"',
        // A and B's second run hold until the test says go, so what waits is seen waiting
        `command = "while [ ! -f ${flags}/a-go ]; do sleep 0.05; done; echo from-A"`,
        "",
        "[[step]]",
        'name = "B"',
        'depends_on = ["A"]',
        "max_attempts = 1",
        // fails until the test leaves the flag; reads A's output from its run directory
        `command = "test -f ${flags}/b-may-pass || exit 3; while [ ! -f ${flags}/b-go ` +
          `]; do sleep 0.05; done; echo from-B after $(cat \\"$EP_PARENTS_DIR/A.out\\")"`,
        "",
        "[[step]]",
        'name = "C"',
        'depends_on = ["A"]',
        'command = "echo from-C"',
        "",
        "[[step]]",
        'name = "D"',
        'depends_on = ["B", "C"]',
        'command = "cat \\"$EP_PARENTS_DIR/B.out\\" \\"$EP_PARENTS_DIR/C.out\\"; echo ids=$EP_PARENT_IDS"',
        "",
      ].join("\n"),
    );
    const env = { EP_BASE_URL: s.tower.url, EP_TOKEN: s.tower.adminToken, EP_HOME: join(s.home, "cli") };
    const run = await ep(["pipeline", "run", file, "--domain", s.domainId, "--json"], { env });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const { mission, steps } = run.json() as {
      mission: { id: string; title: string };
      steps: { id: string; step: string; status: string; depends_on?: string[] }[];
    };
    expect(mission.title).toBe("diamond");
    const id = Object.fromEntries(steps.map((x) => [x.step, x.id]));
    expect(steps.map((x) => [x.step, x.status])).toEqual([
      ["A", "queued"],
      ["B", "waiting"],
      ["C", "waiting"],
      ["D", "waiting"],
    ]);
    expect(steps[3]!.depends_on).toEqual([id.B, id.C]);

    const waitingShown = await ep(["mission", "get", mission.id], { env });
    expect(waitingShown.stdout).toMatch(/pipeline: (queued|running)\n/);
    expect(waitingShown.stdout).toMatch(new RegExp(`B\\s+waiting\\s+A\\s+A\\s+${id.B}`));
    expect(waitingShown.stdout).toMatch(new RegExp(`D\\s+waiting\\s+B, C\\s+B, C\\s+${id.D}`));
    writeFileSync(join(flags, "a-go"), "");

    const work = adminClient(s.tower, WorkService);
    const status = async (step: string) => statusWord((await work.getTask({ taskId: id[step]! })).task!.status);
    // B fails (max_attempts 1): D is cancelled naming B; C still runs
    await waitFor(async () => (await status("B")) === "failed" && (await status("C")) === "succeeded", 30_000);
    const d = (await work.getTask({ taskId: id.D! })).task!;
    expect([d.status, d.result?.error]).toEqual([TaskStatus.CANCELLED, `parent ${id.B} failed`]);
    const failed = await ep(["pipeline", "get", mission.id], { env });
    expect(failed.code).toBe(0);
    expect(failed.stdout).toContain("pipeline diamond");
    expect(failed.stdout).toMatch(/: failed\n/);
    expect(failed.stdout).toMatch(new RegExp(`D\\s+cancelled\\s+B, C\\s+.*parent ${id.B} failed`));

    writeFileSync(join(flags, "b-may-pass"), "");
    const retried = await ep(["task", "retry", id.B!], { env });
    expect(retried.code).toBe(0);
    expect(await status("D")).toBe("waiting");
    const shown = await ep(["mission", "get", mission.id], { env });
    expect(shown.stdout).toMatch(new RegExp(`D\\s+waiting\\s+B, C\\s+B\\s+${id.D}`));

    writeFileSync(join(flags, "b-go"), "");
    await waitFor(async () => (await status("D")) === "succeeded", 30_000);
    const finished = (await ep(["pipeline", "get", mission.id, "--json"], { env })).json();
    expect(finished.state).toBe("succeeded");
    const out = (await work.getTask({ taskId: id.D! })).task!.result!.output;
    expect(out).toBe(`from-B after from-A\nfrom-C\nids=${id.B},${id.C}\n`);

    // D's run started only after both parents' success was committed
    const events = (
      await adminClient(s.tower, EventService).listEvents({ limit: 1000, filter: { missionId: mission.id } })
    ).events;
    const at = (name: string, task: string) =>
      events.filter((e) => e.name === name && e.taskId === task).map((e) => Number(e.id));
    const dClaims = at("task.claimed", id.D!);
    expect(dClaims).toHaveLength(1);
    expect(Math.max(...at("task.succeeded", id.B!), ...at("task.succeeded", id.C!))).toBeLessThan(dClaims[0]!);
    expect(at("task.queued", id.D!)).toHaveLength(1);
    expect(at("task.waiting", id.D!)).toHaveLength(1);
  }, 120_000);
});
