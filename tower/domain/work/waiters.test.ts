// Long-polling claimers: a queued task wakes one waiter that can take it, not the whole domain.
import { describe, expect, it } from "vitest";
import { FakeClock } from "../../../test-support/fake-clock.js";
import type { EventRow } from "../../store/store.js";
import { createEventHub } from "../event-hub.js";
import { WorkWaiters, type Need } from "./waiters.js";

let nextId = 1;
function queued(taskId: string, payload: Record<string, unknown>, agentId = ""): EventRow {
  return {
    id: nextId++,
    type: "matrix",
    name: "task.created",
    domainId: "dom_a",
    missionId: "mis_a",
    agentId,
    taskId,
    sessionId: "",
    status: "queued",
    payload: payload as EventRow["payload"],
    createdAt: "2026-03-01T12:00:00.000Z",
  };
}
const agent = (id: string, capabilities: string[] = [], runtime = "shell") => ({
  id,
  domainId: "dom_a",
  nodeId: "",
  runtime,
  capabilities,
});
const firstClaim = { kind: "claimable", claim_policy: "first_claim", runtime: "", capabilities: [] };

function setup() {
  const hub = createEventHub();
  const clock = new FakeClock("2026-03-01T12:00:00Z");
  const waiters = new WorkWaiters(hub, clock);
  const woke: Record<string, Need | undefined | "waiting"> = {};
  const wait = (a: ReturnType<typeof agent>, ms = 30_000) => {
    woke[a.id] = "waiting";
    void waiters.wait(a, ms).then((n) => (woke[a.id] = n));
  };
  const settle = () => new Promise((r) => setImmediate(r));
  return { hub, clock, waiters, woke, wait, settle };
}

describe("WorkWaiters", () => {
  it("wakes only the longest waiter for a task anyone can take", async () => {
    const { hub, woke, wait, settle } = setup();
    for (const id of ["agt_1", "agt_2", "agt_3"]) wait(agent(id));
    hub.publish([queued("tsk_1", firstClaim)]);
    await settle();
    expect(woke).toMatchObject({ agt_1: { taskId: "tsk_1" }, agt_2: "waiting", agt_3: "waiting" });
    // two more tasks in one batch: one waiter each
    hub.publish([queued("tsk_2", firstClaim), queued("tsk_3", firstClaim)]);
    await settle();
    expect(woke).toMatchObject({ agt_2: { taskId: "tsk_2" }, agt_3: { taskId: "tsk_3" } });
  });

  it("skips waiters that cannot take the task (runtime, capabilities, assignee)", async () => {
    const { hub, woke, wait, settle } = setup();
    wait(agent("agt_plain"));
    wait(agent("agt_gpu", ["gpu"]));
    wait(agent("agt_claude", ["gpu"], "claude_code"));
    hub.publish([queued("tsk_gpu", { ...firstClaim, capabilities: ["gpu"] })]);
    await settle();
    expect(woke).toMatchObject({ agt_plain: "waiting", agt_gpu: { taskId: "tsk_gpu" }, agt_claude: "waiting" });
    hub.publish([queued("tsk_cc", { ...firstClaim, runtime: "claude_code" })]);
    hub.publish([queued("tsk_for_plain", { ...firstClaim, claim_policy: "assigned" }, "agt_plain")]);
    await settle();
    expect(woke).toMatchObject({
      agt_plain: { taskId: "tsk_for_plain", assignee: "agt_plain" },
      agt_claude: { taskId: "tsk_cc" },
    });
  });

  it("wakes nobody for a task no waiter can take, a Kanban task or a broadcast parent", async () => {
    const { hub, woke, wait, settle } = setup();
    wait(agent("agt_1"));
    hub.publish([queued("tsk_x", { ...firstClaim, capabilities: ["tpu"] })]);
    hub.publish([queued("tsk_k", { ...firstClaim, kind: "kanban" })]);
    hub.publish([queued("tsk_b", { ...firstClaim, claim_policy: "broadcast" })]);
    hub.publish([queued("tsk_other", firstClaim)].map((e) => ({ ...e, domainId: "dom_b" })));
    await settle();
    expect(woke.agt_1).toBe("waiting");
  });

  it("wakes everyone in the domain when the event does not say what the task needs", async () => {
    const { hub, woke, wait, settle } = setup();
    wait(agent("agt_1"));
    wait(agent("agt_2", ["gpu"]));
    hub.publish([queued("tsk_old", { kind: "claimable" })]);
    await settle();
    expect(woke).toEqual({ agt_1: undefined, agt_2: undefined });
  });

  it("pass() hands a task on to the next waiter; the deadline and close() answer undefined", async () => {
    const { hub, clock, waiters, woke, wait, settle } = setup();
    wait(agent("agt_1"), 1000);
    wait(agent("agt_2"), 5000);
    wait(agent("agt_3"), 5000);
    hub.publish([queued("tsk_1", firstClaim)]);
    await settle();
    const need = woke.agt_1 as Need;
    expect(need.taskId).toBe("tsk_1");
    waiters.pass(need); // agt_1 ended up with another task: tsk_1 may still be queued
    await settle();
    expect(woke.agt_2).toMatchObject({ taskId: "tsk_1" });
    clock.advance(5000);
    await settle();
    expect(woke.agt_3).toBeUndefined();
    wait(agent("agt_4"));
    waiters.close();
    await settle();
    expect(woke.agt_4).toBeUndefined();
    hub.publish([queued("tsk_2", firstClaim)]); // unsubscribed: nothing throws, nobody waits
  });

  it(
    "claimUntil: a claimer woken for one task that gets " + "another passes the first on; an empty claim does not",
    async () => {
      const { hub, clock, waiters, woke, wait, settle } = setup();
      const results = ["tsk_older", undefined];
      let calls = 0;
      const got: unknown[] = [];
      // nothing at first, then woken for tsk_new but the claim returns tsk_older
      const claimOnce = async () => (calls++ === 0 ? undefined : results.shift());
      void waiters
        .claimUntil(
          agent("agt_1"),
          clock.now() + 30_000,
          async () => {
            const r = await claimOnce();
            return r ? { id: r } : undefined;
          },
          () => false,
        )
        .then((t) => got.push(t));
      await settle();
      wait(agent("agt_2"));
      hub.publish([queued("tsk_new", firstClaim)]);
      await settle();
      await settle();
      expect(got).toEqual([{ id: "tsk_older" }]);
      expect(woke.agt_2).toMatchObject({ taskId: "tsk_new" }); // tsk_new may still be queued
      // a claimer that finds nothing after its wake-up passes nothing on
      wait(agent("agt_3"));
      const none = waiters.claimUntil(
        agent("agt_4"),
        clock.now() + 30_000,
        async () => undefined,
        () => false,
      );
      await settle();
      hub.publish([queued("tsk_gone", firstClaim)]); // agt_3 waited longer: it is woken
      await settle();
      expect(woke.agt_3).toMatchObject({ taskId: "tsk_gone" });
      wait(agent("agt_5"));
      hub.publish([queued("tsk_gone2", firstClaim)]); // agt_4 (waiting in claimUntil) is now the longest
      await settle();
      await settle();
      expect(woke.agt_5).toBe("waiting");
      void none;
    },
  );
});
