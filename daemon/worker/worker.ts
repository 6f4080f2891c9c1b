// The task worker: claims for each idle local agent (claim-loop.ts), runs one ephemeral subagent
// per task (task-run.ts: own process group, fresh directory under $EP_HOME/epd/work/<task_id>,
// progress relayed, lease heartbeated), and reports the outcome until the tower acknowledges it
// (report.ts). Wake-ups come from the link; a periodic poll is the safety net.
import type { ClockTimer } from "../../common/clock.js";
import { createAgentStates } from "./agent-states.js";
import { createClaimLoop } from "./claim-loop.js";
import type { InflightEntry } from "./journal.js";
import type { Task } from "../../gen/ep/tower/v1/resources_pb.js";
import { killOrphanGroup } from "./orphans.js";
import { createOutcomeReporter, refusedByTower } from "./report.js";
import { createRunner, OUTPUT_LIMIT, outcomeOfExit } from "./task-run.js";
import { finishedRun, runRecordOf } from "../runtimes/run-record.js";
import type { TaskWorker, WorkerDeps, WorkerState } from "./worker-types.js";

export type * from "./worker-types.js";
export { OUTPUT_LIMIT, refusedByTower };

export function createTaskWorker(deps: WorkerDeps): TaskWorker {
  const { tower, clock, log, journal } = deps;
  const st: WorkerState = { slots: new Map(), runs: new Map(), blocked: new Map(), backlog: new Set(), ran: new Map(), stopping: false, closed: false };
  // agent state on the tower: coalesced, never on the claim path (agent-states.ts); a claim that
  // starts and an outcome with agent_idle set it at the tower themselves
  const states = createAgentStates({ tower, log, closed: () => st.closed });
  const acknowledged = (e: InflightEntry, next: Task | undefined) => states.assume(e.agentId, next || st.stopping ? "busy" : "idle");
  // a claim_next whose answer was lost may have left the agent holding its next task: its next claim resumes
  const nextMayBeHeld = (e: InflightEntry) => void (claims.slotOf(e.agentId).resume = true);
  const reporter = createOutcomeReporter({ tower, journal, clock, log, backoff: deps.reportBackoff, closed: () => st.closed, stopping: () => st.stopping, acknowledged, nextMayBeHeld });
  const deliver = (entry: InflightEntry, claimNext = false) => reporter.deliver(entry, claimNext);
  const runner = createRunner(deps, st, {
    setAgentState: (agentId, state) => states.set(agentId, state),
    assumeAgentState: (agentId, state) => states.assume(agentId, state),
    deliver,
    // a wake-up found every agent of the domain busy: work may be queued, keep draining — the
    // outcome claims the next task itself (claim_next), else a claim follows the run
    wantsNext: (agent) => !st.stopping && !st.blocked.has(agent.id) && st.backlog.has(agent.domainId),
    handBack: (agent, task) => claims.handBack(agent, task),
    // after its run an agent claims again when work may be queued, or when it may hold a task it never heard of
    afterRun: (agent) => void (!st.stopping && (st.backlog.has(agent.domainId) || claims.slotOf(agent.id).resume) && claims.claimFor(agent)),
  });
  const claims = createClaimLoop(deps, st, runner.startRun);
  const { allAgents, findAgent, slotOf, claimFor } = claims;

  return {
    recover: () =>
      recoverJournal(deps, st, deliver, (agentId) => {
        const a = findAgent(agentId);
        if (a && !st.stopping) void claimFor(a);
      }),

    wake(hint = {}) {
      if (st.stopping) return;
      if (hint.agentId) {
        const a = findAgent(hint.agentId);
        if (!a) return;
        if (slotOf(a.id).state === "busy") st.backlog.add(a.domainId); // it claims again after its run
        void claimFor(a);
        return;
      }
      void claims.wakeDomain(hint);
    },

    take: (agentId, task) => claims.take(agentId, task),

    pollAll(resume = false) {
      if (st.stopping) return;
      for (const a of allAgents()) {
        // a busy agent cannot claim now, yet work may be queued that nobody told us about (the
        // link was down, or a wake-up was lost): it claims again once its run ends
        if (slotOf(a.id).state === "busy") st.backlog.add(a.domainId);
        void claimFor(a, resume);
      }
    },

    cancel(taskId, reason) {
      const run = st.runs.get(taskId);
      if (!run) return false;
      log.info("cancelling task", { task_id: taskId, reason });
      run.stop = "tower_cancel";
      void run.handle?.cancel(reason);
      return true;
    },

    activity: (agentId) => st.slots.get(agentId)?.state ?? "idle",
    running: () => [...st.runs.values()].map((r) => ({ taskId: r.task.id, agentId: r.agent.id, pid: r.handle?.pid })),

    announceAgents() {
      states.announce(allAgents().map((a) => [a.id, slotOf(a.id).state === "busy" ? "busy" : "idle"]));
    },

    async shutdown(graceMs, reportWaitMs = 5000) {
      st.stopping = true;
      // runs whose subprocess is still going; a finished run waiting for its report is a report
      const all = () => Promise.all([...st.runs.values()].map((r) => r.ended));
      if (st.runs.size) {
        log.info("waiting for running tasks", { count: st.runs.size, grace_ms: graceMs });
        let timer: ClockTimer | undefined;
        const timedOut = await Promise.race([
          all().then(() => false),
          new Promise<boolean>((r) => (timer = clock.setTimeout(() => r(true), graceMs))),
        ]);
        if (timer) clock.clearTimeout(timer);
        if (timedOut) {
          for (const r of st.runs.values()) {
            r.stop ??= "shutdown";
            void r.handle?.cancel("epd is shutting down");
          }
          await all();
        }
      }
      if (reporter.pending()) {
        let timer: ClockTimer | undefined;
        await Promise.race([reporter.settled(), new Promise<void>((r) => (timer = clock.setTimeout(r, reportWaitMs)))]);
        if (timer) clock.clearTimeout(timer);
      }
      st.closed = true;
      reporter.stop();
      await reporter.settled();
      await Promise.all([...st.runs.values()].map((r) => r.done));
    },
  };
}

/**
 * Ends what a previous daemon left in the journal: a run it was running is reported when its
 * wrapper wrote its exit status (it ended while no epd watched), else failed retryably (its
 * orphaned processes killed first either way), an outcome the tower did not acknowledge is sent again. The agent
 * claims only once its outcomes are delivered (`claimAgain`).
 */
async function recoverJournal(deps: WorkerDeps, st: WorkerState, deliver: (e: InflightEntry) => Promise<unknown>, claimAgain: (agentId: string) => void): Promise<void> {
  const { journal, log } = deps;
  const recovered = (e: InflightEntry) => {
    st.blocked.set(e.agentId, (st.blocked.get(e.agentId) ?? 0) + 1);
    void deliver(e).finally(() => {
      const left = (st.blocked.get(e.agentId) ?? 1) - 1;
      if (left > 0) return void st.blocked.set(e.agentId, left);
      st.blocked.delete(e.agentId);
      claimAgain(e.agentId);
    });
  };
  for (const e of await journal.load()) {
    if (e.state === "running") {
      const killed = e.pid ? killOrphanGroup(e.pid, e.pidStart) : 0;
      // read after the kill: a wrapper that wrote its status before it went counts
      const finished = finishedRun(runRecordOf(deps.home, e.taskId), OUTPUT_LIMIT);
      // 141 = SIGPIPE: the run wrote to the pipe of the epd that died, and died of it: interrupted, not ended
      if (finished && finished.exitCode !== 141) {
        log.info("a run that ended while epd was down is reported", { task_id: e.taskId, exit_code: finished.exitCode, orphans_killed: killed });
        recovered({ ...e, state: "reporting", outcome: outcomeOfExit(finished) });
        continue;
      }
      log.warn("task held by a previous daemon; failing it so it can run again", { task_id: e.taskId, orphans_killed: killed });
      recovered({ ...e, state: "reporting", outcome: { ok: false, output: "", error: "epd restarted while the task was running", retryable: true } });
    } else if (e.outcome) {
      log.info("resending an outcome the tower did not acknowledge", { task_id: e.taskId });
      recovered(e);
    } else {
      await journal.remove(e.taskId);
    }
  }
}
