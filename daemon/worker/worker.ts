// The task worker: takes the tasks the tower hands its agents over the link (each under its lease;
// docs/daemon.md, "How work reaches a node"), runs one ephemeral subagent per task (task-run.ts:
// own process group, fresh directory under $EP_HOME/epd/work/<task_id>, progress relayed, lease
// heartbeated), and reports the outcome until the tower acknowledges it (report.ts). While the link
// is down, idle agents claim on the poll (claim-loop.ts), the recovery path.
import type { ClockTimer } from "../../common/clock.js";
import { createAgentStates } from "./agent-states.js";
import { createClaimLoop } from "./claim-loop.js";
import type { InflightEntry } from "./journal.js";
import type { Task } from "../../gen/ep/tower/v1/resources_pb.js";
import { killOrphanGroup } from "./orphans.js";
import { createOutcomeReporter, refusedByTower } from "./report.js";
import { createRunner, OUTPUT_LIMIT, outcomeOfExit } from "./task-run.js";
import { finishedRun, runRecordOf } from "../runtimes/run-record.js";
import type { HeldAgent, TaskWorker, WorkerDeps, WorkerState } from "./worker-types.js";

export type * from "./worker-types.js";
export { OUTPUT_LIMIT, refusedByTower };

export function createTaskWorker(deps: WorkerDeps): TaskWorker {
  const { tower, clock, log, journal } = deps;
  const st: WorkerState = { slots: new Map(), runs: new Map(), stopping: false, closed: false };
  // an agent whose run ended without an outcome for the tower (cancelled, lease lost) is idle again
  const states = createAgentStates({ tower, log, closed: () => st.closed });
  // an outcome says the agent is idle when it runs nothing else and epd is not stopping (the
  // tower then hands it its next task)
  const idleNow = (agentId: string) => !st.stopping && claims.slotOf(agentId).state === "idle";
  const reporter = createOutcomeReporter({
    tower,
    journal,
    clock,
    log,
    backoff: deps.reportBackoff,
    closed: () => st.closed,
    idleNow,
    uplink: deps.uplink,
  });

  /**
   * A task this daemon holds but will not run goes straight back: queued again, uncounted; the agent stays busy at the
   * tower.
   */
  async function giveBack(agent: { id: string }, task: Task, why: string): Promise<void> {
    log.info("giving a task back", { agent_id: agent.id, task_id: task.id, why });
    await tower.work
      .failTask({
        taskId: task.id,
        agentId: agent.id,
        leaseId: task.leaseId,
        release: true,
        retryable: true,
        result: { output: "", error: why },
      })
      .catch(() => undefined);
  }

  const runner = createRunner(deps, st, {
    deliver: (entry) => void reporter.deliver(entry),
    idleWithoutOutcome: (agentId) => states.set(agentId, "idle"),
  });
  const claims = createClaimLoop(deps, st, runner.startRun, giveBack);
  const { allAgents, findAgent, slotOf, claimFor } = claims;

  return {
    recover: () => recoverJournal(deps, (e) => void reporter.deliver(e)),

    take(agentId, task, parents) {
      const agent = findAgent(agentId);
      if (!agent) return void giveBack({ id: agentId }, task, "the agent is not on this node");
      const slot = slotOf(agent.id);
      if (st.runs.get(task.id)?.task.leaseId === task.leaseId) return; // this very claim runs here already
      if (st.stopping || slot.state !== "idle") {
        // a claim of our own in flight makes way (its task goes back); a running agent gives this one back
        if (slot.state === "claiming" && !st.stopping) slot.state = "idle";
        else return void giveBack(agent, task, st.stopping ? "epd is shutting down" : "the agent is busy");
      }
      slot.state = "busy";
      slot.taskId = task.id;
      runner.startRun(agent, slot, task, parents);
    },

    reachable: () => reporter.retryNow(),

    async pollAll() {
      if (st.stopping) return;
      await Promise.all(allAgents().map((a) => claimFor(a)));
    },

    held(): HeldAgent[] {
      const leases = new Map<string, string[]>();
      const add = (agentId: string, leaseId: string | undefined) => {
        if (!leaseId) return;
        const l = leases.get(agentId);
        if (l) l.push(leaseId);
        else leases.set(agentId, [leaseId]);
      };
      for (const r of st.runs.values()) add(r.agent.id, r.task.leaseId);
      for (const e of journal.entries()) if (!st.runs.has(e.taskId)) add(e.agentId, e.leaseId);
      return allAgents().map((a) => ({
        agentId: a.id,
        leaseIds: [...new Set(leases.get(a.id) ?? [])],
        idle: idleNow(a.id),
      }));
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
 * orphaned processes killed first either way); an outcome the tower did not acknowledge is sent
 * again — each under the lease of its claim, so the tower takes it only for that claim.
 */
async function recoverJournal(deps: WorkerDeps, deliver: (e: InflightEntry) => void): Promise<void> {
  const { journal, log } = deps;
  for (const e of await journal.load()) {
    if (e.state === "running") {
      const killed = e.pid ? killOrphanGroup(e.pid, e.pidStart) : 0;
      // read after the kill: a wrapper that wrote its status before it went counts
      const finished = finishedRun(runRecordOf(deps.home, e.taskId), OUTPUT_LIMIT);
      // 141 = SIGPIPE: the run wrote to the pipe of the epd that died, and died of it: interrupted, not ended
      if (finished && finished.exitCode !== 141) {
        log.info("a run that ended while epd was down is reported", {
          task_id: e.taskId,
          exit_code: finished.exitCode,
          orphans_killed: killed,
        });
        deliver({ ...e, state: "reporting", outcome: outcomeOfExit(finished) });
        continue;
      }
      log.warn("task held by a previous daemon; failing it so it can run again", {
        task_id: e.taskId,
        orphans_killed: killed,
      });
      deliver({
        ...e,
        state: "reporting",
        outcome: { ok: false, output: "", error: "epd restarted while the task was running", retryable: true },
      });
    } else if (e.outcome) {
      log.info("resending an outcome the tower did not acknowledge", { task_id: e.taskId });
      deliver(e);
    } else {
      await journal.remove(e.taskId);
    }
  }
}
