// Pushed tasks meeting the claim loop (the tower claimed for an agent it saw idle): run at once when
// the slot is idle, after a claim in flight that comes back empty, given back (release) when the
// claim brought another task, the slot is busy, or epd is stopping. The tower client is a stub
// recording calls; the claim loop is the real one.
import { describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { TaskSchema, TaskStatus, type Task } from "../../gen/ep/tower/v1/resources_pb.js";
import { silentLogger } from "../../common/log.js";
import type { LocalAgentRecord } from "./agent-store.js";
import { createClaimLoop } from "./claim-loop.js";
import { noteRun, RAN_KEPT } from "./pushed-tasks.js";
import type { Slot, WorkerDeps, WorkerState } from "./worker-types.js";

/** A task as a claim delivers it: its attempt and the time the claim started it tell one claim from another. */
const task = (id: string, attempts = 1, claimedAtMs = 1_000): Task =>
  create(TaskSchema, { id, status: TaskStatus.RUNNING, claimedBy: "agt_1", attempts, updatedAt: timestampFromMs(claimedAtMs) });

function setup(extra: Partial<WorkerDeps> = {}) {
  const agent = { id: "agt_1", name: "a", domainId: "dom_1", runtime: "shell", capabilities: [] } as unknown as LocalAgentRecord;
  let answer!: (t: Task | undefined) => void;
  let refuse!: (err: Error) => void;
  const released: { taskId: string; release: boolean; why: string }[] = [];
  const claims: { resume?: boolean }[] = [];
  const tower = {
    work: {
      claimTask: (req: { resume?: boolean }) => {
        claims.push(req);
        return new Promise<{ task?: Task }>((res, rej) => ((answer = (t) => res({ task: t })), (refuse = rej)));
      },
      failTask: async (req: { taskId: string; release?: boolean; result?: { error?: string } }) => {
        released.push({ taskId: req.taskId, release: req.release === true, why: req.result?.error ?? "" });
        return {};
      },
    },
  };
  const deps = { tower, agents: { list: () => [agent], find: (id: string) => (id === agent.id ? agent : undefined) }, log: silentLogger, ...extra } as unknown as WorkerDeps;
  const st: WorkerState = { slots: new Map(), runs: new Map(), blocked: new Map(), backlog: new Set(), ran: new Map(), stopping: false, closed: false };
  const started: string[] = [];
  // as the runner's startRun does: the slot is busy and the attempt is noted as run here
  const loop = createClaimLoop(deps, st, (_a, slot: Slot, t) => {
    started.push(t.id);
    noteRun(st, t);
    slot.state = "busy";
  });
  const settle = () => new Promise((r) => setImmediate(r));
  return { loop, st, started, released, claims, answer: (t: Task | undefined) => answer(t), refuse: (err: Error) => refuse(err), settle };
}

describe("pushed tasks in the claim loop", () => {
  it("an idle slot runs a pushed task at once", () => {
    const { loop, started, released } = setup();
    loop.take("agt_1", task("tsk_p"));
    expect(started).toEqual(["tsk_p"]);
    expect(loop.slotOf("agt_1")).toMatchObject({ state: "busy", taskId: "tsk_p" });
    expect(released).toEqual([]);
  });

  it("during a claim: runs it when the claim comes back empty, gives it back when the claim got a task", async () => {
    const a = setup();
    const claim = a.loop.claimFor({ id: "agt_1", domainId: "dom_1" } as LocalAgentRecord);
    a.loop.take("agt_1", task("tsk_p"));
    expect(a.started).toEqual([]);
    a.answer(undefined);
    expect(await claim).toBe("tsk_p");
    expect(a.started).toEqual(["tsk_p"]);

    const b = setup();
    const claim2 = b.loop.claimFor({ id: "agt_1", domainId: "dom_1" } as LocalAgentRecord);
    b.loop.take("agt_1", task("tsk_p"));
    b.answer(task("tsk_c"));
    expect(await claim2).toBe("tsk_c");
    await b.settle();
    expect(b.started).toEqual(["tsk_c"]);
    expect(b.released).toEqual([{ taskId: "tsk_p", release: true, why: "the agent claimed another task" }]);
  });

  it("a busy slot, a second push during a claim, an unknown agent and a stopping epd give it back", async () => {
    const { loop, st, started, released, settle } = setup();
    loop.take("agt_1", task("tsk_1"));
    loop.take("agt_1", task("tsk_busy"));
    expect(st.backlog.has("dom_1")).toBe(true); // work may be queued for it after this run
    loop.take("agt_nope", task("tsk_unknown"));
    st.slots.get("agt_1")!.state = "idle";
    st.stopping = true;
    loop.take("agt_1", task("tsk_stopping"));
    await settle();
    expect(started).toEqual(["tsk_1"]);
    expect(released.map((r) => [r.taskId, r.release, r.why])).toEqual([
      ["tsk_busy", true, "the agent is busy"],
      ["tsk_unknown", true, "the agent is not on this node"],
      ["tsk_stopping", true, "epd is shutting down"],
    ]);
  });

  it("a busy slot whose run is reporting keeps the pushed task for when the outcome is acknowledged", () => {
    const { loop, st, started, released } = setup();
    loop.take("agt_1", task("tsk_1"));
    st.runs.set("tsk_1", { reporting: true } as never);
    loop.take("agt_1", task("tsk_next"));
    expect(loop.slotOf("agt_1").pushed?.id).toBe("tsk_next");
    expect(started).toEqual(["tsk_1"]);
    expect(released).toEqual([]);
  });

  it("a push of a task this daemon already runs (a resumed claim took it up first) is not run twice nor given back", () => {
    const { loop, st, started, released } = setup();
    loop.take("agt_1", task("tsk_1"));
    st.runs.set("tsk_1", {} as never);
    loop.take("agt_1", task("tsk_1"));
    expect(started).toEqual(["tsk_1"]);
    expect(loop.slotOf("agt_1").pushed).toBeUndefined();
    expect(released).toEqual([]);
    // the same task pushed again, claimed anew for its next attempt, while the earlier one reports
    // (it failed retryably): it waits for the outcome to be acknowledged
    st.runs.set("tsk_1", { reporting: true } as never);
    loop.take("agt_1", task("tsk_1", 2, 2_000));
    expect(loop.slotOf("agt_1").pushed?.id).toBe("tsk_1");
  });

  it("the push of a claim that already ran here, arriving while its run reports or after it ended, is not run again", async () => {
    const { loop, st, started, released, answer, settle } = setup();
    // a resumed claim took the pushed task up first; the run failed at once and reports
    const claim = loop.claimFor({ id: "agt_1", domainId: "dom_1" } as LocalAgentRecord, true);
    answer(task("tsk_p"));
    expect(await claim).toBe("tsk_p");
    st.runs.set("tsk_p", { reporting: true } as never);
    loop.take("agt_1", task("tsk_p")); // the push, late
    expect(loop.slotOf("agt_1").pushed).toBeUndefined();
    // the run ended and the slot is idle: the same attempt pushed again still does not run
    st.runs.delete("tsk_p");
    Object.assign(loop.slotOf("agt_1"), { state: "idle", taskId: undefined });
    loop.take("agt_1", task("tsk_p"));
    await settle();
    expect(started).toEqual(["tsk_p"]);
    expect(loop.slotOf("agt_1").state).toBe("idle");
    expect(released).toEqual([]); // nothing to give back: the outcome is on its way
    // claimed anew — its next attempt after a retryable failure, or attempt 1 again after an
    // operator's retry (which sets the attempts back to 0) — it runs
    loop.take("agt_1", task("tsk_p", 2, 2_000));
    expect(started).toEqual(["tsk_p", "tsk_p"]);
    Object.assign(loop.slotOf("agt_1"), { state: "idle", taskId: undefined });
    loop.take("agt_1", task("tsk_p", 1, 3_000));
    expect(started).toEqual(["tsk_p", "tsk_p", "tsk_p"]);
  });

  it("a resumed claim answering a claim that already ran here runs nothing and does not claim again at once", async () => {
    const { loop, st, started, claims, answer, settle } = setup();
    const agent = { id: "agt_1", domainId: "dom_1" } as LocalAgentRecord;
    loop.take("agt_1", task("tsk_p")); // pushed, run; its outcome is on its way to the tower
    Object.assign(loop.slotOf("agt_1"), { state: "idle", taskId: undefined });
    st.backlog.add("dom_1");
    const claim = loop.claimFor(agent, true);
    void loop.claimFor(agent); // a wake-up meanwhile: the claim would look once more
    answer(task("tsk_p"));
    expect(await claim).toBeUndefined();
    await settle();
    expect(started).toEqual(["tsk_p"]);
    expect(claims).toHaveLength(1);
    expect(loop.slotOf("agt_1").state).toBe("idle");
    expect(st.backlog.has("dom_1")).toBe(true); // the queue was not looked at
  });

  it("remembers the last RAN_KEPT tasks started", () => {
    const { st } = setup();
    for (let i = 0; i <= RAN_KEPT; i++) noteRun(st, task(`tsk_${i}`));
    expect(st.ran.size).toBe(RAN_KEPT);
    expect(st.ran.has("tsk_0")).toBe(false);
    expect(st.ran.has(`tsk_${RAN_KEPT}`)).toBe(true);
  });

  it("a claim with resume that answers the task being pushed meanwhile runs it once", async () => {
    const { loop, started, released, claims, answer, settle } = setup();
    const claim = loop.claimFor({ id: "agt_1", domainId: "dom_1" } as LocalAgentRecord, true);
    loop.take("agt_1", task("tsk_p"));
    answer(task("tsk_p"));
    expect(await claim).toBe("tsk_p");
    await settle();
    expect(claims).toEqual([{ agentId: "agt_1", start: true, resume: true }]);
    expect(started).toEqual(["tsk_p"]);
    expect(released).toEqual([]);
    expect(loop.slotOf("agt_1").pushed).toBeUndefined();
  });

  it("polls resume, and so does the claim after a failed one (its answer may have been lost); other claims do not", async () => {
    const { loop, claims, answer, refuse } = setup();
    const agent = { id: "agt_1", domainId: "dom_1" } as LocalAgentRecord;
    let claim = loop.claimFor(agent);
    refuse(new Error("socket hang up"));
    await claim;
    claim = loop.claimFor(agent);
    answer(undefined);
    await claim;
    claim = loop.claimFor(agent);
    answer(undefined);
    await claim;
    // a poll during a claim asks once more, resuming
    claim = loop.claimFor(agent);
    void loop.claimFor(agent, true);
    answer(undefined);
    await new Promise((r) => setImmediate(r));
    answer(undefined);
    await claim;
    expect(claims.map((c) => c.resume)).toEqual([false, true, false, false, true]);
  });

  it("with pushed work every claim resumes: one that meets the task pushed for its agent runs it, nothing given back", async () => {
    const { loop, claims, answer, started, released, settle } = setup({ resumeEveryClaim: true });
    const agent = { id: "agt_1", domainId: "dom_1" } as LocalAgentRecord;
    // a wake-up's claim; the tower pushes to the same agent meanwhile, and the claim answers that task
    const claim = loop.claimFor(agent);
    loop.take("agt_1", task("tsk_p"));
    answer(task("tsk_p"));
    expect(await claim).toBe("tsk_p");
    await settle();
    expect(claims.map((c) => c.resume)).toEqual([true]);
    expect(started).toEqual(["tsk_p"]);
    expect(released).toEqual([]);
  });
});

