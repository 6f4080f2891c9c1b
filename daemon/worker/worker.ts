// The task worker: claims for each idle local agent, runs one ephemeral subagent per task (own
// process group, fresh directory under $EP_HOME/epd/work/<task_id>), relays progress, heartbeats
// the lease, and reports the outcome until the tower acknowledges it. Wake-ups come from the link;
// a periodic poll is the safety net.
import type { JsonObject } from "@bufbuild/protobuf";
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Clock, ClockTimer } from "../../common/clock.js";
import { iso } from "../../common/clock.js";
import { toEpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import type { Task } from "../../gen/ep/tower/v1/resources_pb.js";
import type { TowerClients } from "../link/tower-client.js";
import type { ProgressFrame, RunHandle, RunResult } from "../runtimes/runtime.js";
import type { RuntimeRegistry } from "../runtimes/registry.js";
import type { AgentStore, LocalAgentRecord } from "./agent-store.js";
import { createFrameBatcher } from "./frame-batcher.js";
import { createAgentStates } from "./agent-states.js";
import { createOutcomeReporter, refusedByTower } from "./report.js";

export { refusedByTower };
import type { InflightEntry, Journal, TaskOutcome } from "./journal.js";
import { killOrphanGroup, processStartTime } from "./orphans.js";
import type { SessionTable } from "./sessions.js";
import type { RunRedactor } from "../secrets/broker.js";

export const OUTPUT_LIMIT = 64 * 1024;

export interface WorkerDeps {
  tower: TowerClients;
  agents: AgentStore;
  runtimes: RuntimeRegistry;
  journal: Journal;
  sessions: SessionTable;
  clock: Clock;
  log: Logger;
  /** $EP_HOME/epd */
  home: string;
  secretsSocket: string;
  /** put first on every run's PATH (holds an `epd` launcher) */
  binDir: string;
  /** the environment runs start from (the daemon's own, minus its credentials) */
  baseEnv: Record<string, string>;
  /** the secrets broker's redaction: fetched values become [redacted:NAME] in frames and results */
  redactor?: (sessionId: string) => RunRedactor;
  progressWindowMs?: number;
  /** Writes the run's MCP config (`epd mcp` for this agent) into its cwd and returns the path (daemon/mcp/agent-config.ts). */
  mcpConfig?: (cwd: string, run: { agentId: string; domainId: string }) => Promise<string>;
  reportBackoff?: { initialMs?: number; maxMs?: number };
  /**
   * Profile agents of agents.toml enrolled at the tower (daemon/fleet): they claim like the
   * agents of agents.json, under their tower agent id, and each task runs as an ephemeral run of
   * the profile's runtime in the profile's cwd with the profile's env (docs/supervision.md).
   */
  profiles?: ProfileClaimers;
}

/** Claimers that live in the fleet rather than in agents.json. */
export interface ProfileClaimers {
  /** Enrolled profiles as claimers: `id` is the tower agent id, `profile` the agents.toml id. */
  list(): LocalAgentRecord[];
  /** Where a task of this profile runs: its cwd and its environment (without the per-run EP_* variables). */
  place(profileId: string): { cwd: string; env: Record<string, string> } | undefined;
}

export type AgentActivity = "idle" | "claiming" | "busy";

export interface WakeHint {
  agentId?: string;
  domainId?: string;
  taskId?: string;
  /** what the ready task needs ("" = any runtime); undefined when the tower did not say */
  runtime?: string;
  capabilities?: string[];
}

interface Slot {
  state: AgentActivity;
  /** a wake-up arrived while claiming: claim once more before going idle */
  again: boolean;
  taskId?: string;
}

interface Run {
  task: Task;
  agent: LocalAgentRecord;
  handle?: RunHandle;
  entry: InflightEntry;
  /** why the run is being stopped by us, if it is */
  stop?: "tower_cancel" | "lease_lost" | "shutdown";
  /** settles when the subprocess is over, before its outcome is reported */
  ended: Promise<void>;
  markEnded(): void;
  /** settles when the run is over and its outcome delivered (or left in the journal at shutdown) */
  done: Promise<void>;
}

export interface TaskWorker {
  /** Ends what a previous daemon left (orphaned runs failed retryably, pending reports resent). */
  recover(): Promise<void>;
  /**
   * A task may be ready: for one agent, or for a domain. With the task's runtime and
   * capabilities (the tower sends them) one idle agent that can take it claims; without them
   * idle agents of the domain claim one after the other until one gets work.
   */
  wake(hint?: WakeHint): void;
  /** Claims for every idle agent; a busy one claims once its run ends (startup, reconnect, periodic poll). */
  pollAll(): void;
  /** Stops a running task (the tower cancelled it); false when it is not running here. */
  cancel(taskId: string, reason: string): boolean;
  activity(agentId: string): AgentActivity;
  running(): { taskId: string; agentId: string; pid?: number }[];
  /** Tells the tower each local agent's state again (after the link came back). */
  announceAgents(): void;
  /** Stops claiming; waits up to graceMs for runs, then cancels the rest (failed retryably); waits for reports up to reportWaitMs. */
  shutdown(graceMs: number, reportWaitMs?: number): Promise<void>;
}

export function createTaskWorker(deps: WorkerDeps): TaskWorker {
  const { tower, agents, clock, log, journal, sessions } = deps;
  const slots = new Map<string, Slot>();
  const runs = new Map<string, Run>();
  let stopping = false;
  let closed = false;
  const reporter = createOutcomeReporter({ tower, journal, clock, log, backoff: deps.reportBackoff, closed: () => closed });
  const deliver = (entry: InflightEntry) => reporter.deliver(entry);
  let rotate = 0;
  /** agents with an outcome from a previous daemon still undelivered: they claim only once it is */
  const blocked = new Map<string, number>();

  /**
   * Domains where a wake-up found no idle agent to claim with: work may be queued there, so an
   * agent of the domain that finishes a run claims again. A claim that comes back empty clears it.
   */
  const backlog = new Set<string>();

  /** Everyone who claims here: agents.json, then the enrolled profiles. */
  const allAgents = (): LocalAgentRecord[] => {
    const own = agents.list();
    const ids = new Set(own.map((a) => a.id));
    return [...own, ...(deps.profiles?.list() ?? []).filter((p) => !ids.has(p.id))];
  };
  const findAgent = (id: string): LocalAgentRecord | undefined => agents.find(id) ?? deps.profiles?.list().find((p) => p.id === id);

  const slotOf = (agentId: string): Slot => {
    let s = slots.get(agentId);
    if (!s) slots.set(agentId, (s = { state: "idle", again: false }));
    return s;
  };

  // agent state on the tower: coalesced, never on the claim path (agent-states.ts)
  const states = createAgentStates({ tower, log, closed: () => closed });
  const setAgentState = (agentId: string, state: string) => states.set(agentId, state);

  // ---- claiming

  /** Claims for one agent; the id of the task it got, or undefined. */
  async function claimFor(agent: LocalAgentRecord): Promise<string | undefined> {
    const slot = slotOf(agent.id);
    if (stopping || blocked.has(agent.id)) return undefined;
    if (slot.state !== "idle") {
      if (slot.state === "claiming") slot.again = true;
      return undefined;
    }
    slot.state = "claiming";
    for (;;) {
      slot.again = false;
      let task: Task | undefined;
      try {
        task = (await tower.work.claimTask({ agentId: agent.id, waitMs: 0 })).task;
      } catch (err) {
        const e = toEpError(err);
        log.warn("claim failed", { agent_id: agent.id, code: e.code, error: e.message });
        slot.state = "idle";
        return undefined;
      }
      if (task) {
        if (stopping) {
          // claimed while shutting down: hand it straight back
          slot.state = "idle";
          // best effort on the way out: if the tower does not hear it, the lease expires and the task is queued again
          await tower.work.failTask({ taskId: task.id, agentId: agent.id, retryable: true, result: { output: "", error: "epd is shutting down" } }).catch(() => undefined);
          return undefined;
        }
        slot.state = "busy";
        slot.taskId = task.id;
        startRun(agent, slot, task);
        return task.id;
      }
      if (!slot.again || stopping) {
        // nothing queued for this agent right now
        backlog.delete(agent.domainId);
        slot.state = "idle";
        return undefined;
      }
    }
  }

  const canTake = (a: LocalAgentRecord, hint: WakeHint) =>
    hint.runtime === undefined || ((!hint.runtime || hint.runtime === a.runtime) && (hint.capabilities ?? []).every((c) => a.capabilities.includes(c)));

  async function wakeDomain(hint: WakeHint): Promise<void> {
    const list = allAgents().filter((a) => (!hint.domainId || a.domainId === hint.domainId) && canTake(a, hint));
    if (!list.length) return;
    const start = rotate++ % list.length;
    const ordered = [...list.slice(start), ...list.slice(0, start)];
    const idle = ordered.filter((a) => slotOf(a.id).state === "idle" && !blocked.has(a.id));
    if (!idle.length) {
      // every agent that could take it is claiming or busy: the claiming ones look once more,
      // and the next one to finish a run claims again
      for (const a of ordered) if (slotOf(a.id).state === "claiming") slotOf(a.id).again = true;
      for (const a of ordered) backlog.add(a.domainId);
      return;
    }
    if (hint.runtime === undefined) {
      // the tower did not say what the task needs: idle agents try one after the other
      for (const a of idle) if (await claimFor(a)) return;
      return;
    }
    // One claim per ready task, by an idle agent that can take it. Empty means another claimer
    // took it; a different task (an older or higher-priority one) means this one may still be
    // queued, so the next idle agent tries.
    for (const a of idle) {
      const got = await claimFor(a);
      if (!got || !hint.taskId || got === hint.taskId) return;
    }
  }

  // ---- running

  function tail(text: string): string {
    return text.length > OUTPUT_LIMIT ? text.slice(-OUTPUT_LIMIT) : text;
  }

  function promptOf(task: Task): string {
    const p = task.input?.prompt;
    if (typeof p === "string" && p.trim()) return p;
    return [task.title, task.description].filter(Boolean).join("\n\n");
  }

  function startRun(agent: LocalAgentRecord, slot: Slot, task: Task): void {
    const entry: InflightEntry = { taskId: task.id, agentId: agent.id, state: "running", startedAt: iso(clock.now()) };
    let markEnded!: () => void;
    const ended = new Promise<void>((resolve) => (markEnded = resolve));
    const run: Run = { task, agent, entry, ended, markEnded, done: Promise.resolve() };
    runs.set(task.id, run);
    run.done = execute(run)
      .catch((err: Error) => log.error("task run failed unexpectedly", { task_id: task.id, error: err.message, stack: err.stack }))
      .finally(() => {
        run.markEnded();
        runs.delete(task.id);
        slot.state = "idle";
        slot.taskId = undefined;
        setAgentState(agent.id, "idle");
        // a wake-up found every agent busy meanwhile: work may be queued, keep draining
        if (!stopping && backlog.has(agent.domainId)) void claimFor(agent);
      });
  }

  async function execute(run: Run): Promise<void> {
    const { task, agent, entry } = run;
    const tlog = log.child({ task_id: task.id, agent_id: agent.id });
    void journal.put(entry);
    setAgentState(agent.id, "busy");
    try {
      await tower.work.startTask({ taskId: task.id, agentId: agent.id });
    } catch (err) {
      const refused = refusedByTower(err);
      if (refused) {
        tlog.warn("task not started; dropping it", { code: refused.code, error: refused.message });
        await journal.remove(task.id);
        return;
      }
      tlog.warn("start not acknowledged; running anyway", { error: toEpError(err).message });
    }

    // work/<task_id>/ is fresh for every run: the run's cwd, and where its MCP config is written.
    // A profile's task runs in the profile's own cwd with its env (its config stays out of it).
    const workDir = join(deps.home, "work", task.id);
    await rm(workDir, { recursive: true, force: true });
    await mkdir(workDir, { recursive: true, mode: 0o700 });
    const place = agent.profile ? deps.profiles?.place(agent.profile) : undefined;
    if (agent.profile && !place) tlog.warn("profile gone from agents.toml; the task runs in a fresh directory", { profile: agent.profile });
    const cwd = place?.cwd ?? workDir;
    if (place) await mkdir(cwd, { recursive: true, mode: 0o700 });
    const mcpConfig = await deps.mcpConfig?.(workDir, { agentId: agent.id, domainId: agent.domainId }).catch((err: unknown) => {
      tlog.warn("MCP config not written; the run starts without the EP tools", { error: toEpError(err).message });
      return undefined;
    });
    const session = sessions.open({ taskId: task.id, agentId: agent.id, domainId: agent.domainId });
    const redactor = deps.redactor?.(session.id);
    const batcher = createFrameBatcher({
      clock,
      windowMs: deps.progressWindowMs ?? 50,
      send: async (frames) => {
        await tower.work
          .reportProgress({ taskId: task.id, agentId: agent.id, frames: frames.map((f) => ({ kind: f.kind, text: f.text, data: f.data as JsonObject | undefined })) })
          .catch((err: unknown) => tlog.debug("progress not delivered", { error: toEpError(err).message }));
      },
    });

    const env: Record<string, string> = {
      ...(place ? place.env : deps.baseEnv),
      PATH: place?.env.PATH ?? [deps.binDir, deps.baseEnv.PATH ?? "/usr/local/bin:/usr/bin:/bin"].join(":"),
      EP_SECRETS_SOCKET: deps.secretsSocket,
      EP_SECRETS_SESSION: session.id,
      EP_TASK_ID: task.id,
      EP_AGENT_ID: agent.id,
      EP_DOMAIN_ID: agent.domainId,
      EP_MISSION_ID: task.missionId,
      EP_BASE_URL: tower.baseUrl,
      ...(mcpConfig ? { EP_MCP_CONFIG: mcpConfig } : {}),
    };
    let result: RunResult;
    let heartbeat: ClockTimer | undefined;
    try {
      run.handle = deps.runtimes.start(agent.runtime, {
        taskId: task.id,
        agentId: agent.id,
        prompt: promptOf(task),
        input: (task.input ?? {}) as Record<string, unknown>,
        cwd,
        env,
        onFrame: (f: ProgressFrame) => batcher.push(redactor ? redactor.frame(f) : f),
      });
      if (run.stop) void run.handle.cancel(run.stop);
      const pid = run.handle.pid;
      if (pid) {
        session.pid = pid;
        entry.pid = pid;
        entry.pidStart = processStartTime(pid);
        void journal.put(entry);
      }
      const leaseMs = Math.max(300, Date.parse(task.leaseExpiresAt) - Date.parse(task.updatedAt) || 60_000);
      const beat = () => {
        heartbeat = clock.setTimeout(() => {
          tower.work.heartbeatTask({ taskId: task.id, agentId: agent.id }).then(
            () => {
              if (runs.has(task.id) && !run.stop) beat();
            },
            (err: unknown) => {
              const e = refusedByTower(err) ?? toEpError(err);
              if (refusedByTower(err) && (e.errorClass === "conflict" || e.errorClass === "not_found")) {
                tlog.warn("lease lost; stopping the run", { code: e.code, error: e.message });
                run.stop ??= "lease_lost";
                void run.handle?.cancel(`lease lost: ${e.message}`);
              } else {
                tlog.warn("heartbeat failed; retrying", { error: e.message });
                if (runs.has(task.id)) beat();
              }
            },
          );
        }, Math.floor(leaseMs / 3));
      };
      beat();
      result = await run.handle.result;
    } catch (err) {
      const e = toEpError(err);
      result = { ok: false, output: "", error: e.message, errorCode: e.code };
    } finally {
      if (heartbeat) clock.clearTimeout(heartbeat);
      sessions.end(session.id);
    }
    await batcher.flush();
    if (redactor) result = redactor.result(result);
    redactor?.release();

    if (run.stop === "tower_cancel" || run.stop === "lease_lost") {
      tlog.info("run stopped", { why: run.stop });
      await journal.remove(task.id);
      return;
    }
    const outcome: TaskOutcome = result.ok
      ? { ok: true, output: tail(result.output), exitCode: result.exitCode, retryable: false, ...(result.usage ? { usage: result.usage } : {}) }
      : {
          ok: false,
          output: tail(result.output),
          exitCode: result.exitCode,
          error: run.stop === "shutdown" ? "epd shut down before the task finished" : result.error || (result.timedOut ? "timed out" : "failed"),
          // a run that failed on its own is final (the operator retries it); one we interrupted may run elsewhere
          retryable: run.stop === "shutdown",
          ...(result.usage ? { usage: result.usage } : {}),
        };
    tlog.info("run finished", { ok: outcome.ok, exit_code: outcome.exitCode, error: outcome.error });
    // the agent stays busy until the tower has the outcome, but a shutdown waits for the report
    // only up to its report deadline (the journal keeps it for the next start)
    const delivered = deliver({ ...entry, state: "reporting", outcome });
    run.markEnded();
    await delivered;
  }

  return {
    async recover() {
      const recovered = (e: InflightEntry) => {
        blocked.set(e.agentId, (blocked.get(e.agentId) ?? 0) + 1);
        void deliver(e).finally(() => {
          const left = (blocked.get(e.agentId) ?? 1) - 1;
          if (left > 0) return void blocked.set(e.agentId, left);
          blocked.delete(e.agentId);
          const a = findAgent(e.agentId);
          if (a && !stopping) void claimFor(a);
        });
      };
      for (const e of await journal.load()) {
        if (e.state === "running") {
          const killed = e.pid ? killOrphanGroup(e.pid, e.pidStart) : 0;
          log.warn("task held by a previous daemon; failing it so it can run again", { task_id: e.taskId, orphans_killed: killed });
          recovered({ ...e, state: "reporting", outcome: { ok: false, output: "", error: "epd restarted while the task was running", retryable: true } });
        } else if (e.outcome) {
          log.info("resending an outcome the tower did not acknowledge", { task_id: e.taskId });
          recovered(e);
        } else {
          await journal.remove(e.taskId);
        }
      }
    },

    wake(hint = {}) {
      if (stopping) return;
      if (hint.agentId) {
        const a = findAgent(hint.agentId);
        if (!a) return;
        if (slotOf(a.id).state === "busy") backlog.add(a.domainId); // it claims again after its run
        void claimFor(a);
        return;
      }
      void wakeDomain(hint);
    },

    pollAll() {
      if (stopping) return;
      for (const a of allAgents()) {
        // a busy agent cannot claim now, yet work may be queued that nobody told us about (the
        // link was down, or a wake-up was lost): it claims again once its run ends
        if (slotOf(a.id).state === "busy") backlog.add(a.domainId);
        void claimFor(a);
      }
    },

    cancel(taskId, reason) {
      const run = runs.get(taskId);
      if (!run) return false;
      log.info("cancelling task", { task_id: taskId, reason });
      run.stop = "tower_cancel";
      void run.handle?.cancel(reason);
      return true;
    },

    activity: (agentId) => slots.get(agentId)?.state ?? "idle",
    running: () => [...runs.values()].map((r) => ({ taskId: r.task.id, agentId: r.agent.id, pid: r.handle?.pid })),

    announceAgents() {
      states.announce(allAgents().map((a) => [a.id, slotOf(a.id).state === "busy" ? "busy" : "idle"]));
    },

    async shutdown(graceMs, reportWaitMs = 5000) {
      stopping = true;
      // runs whose subprocess is still going; a finished run waiting for its report is a report
      const all = () => Promise.all([...runs.values()].map((r) => r.ended));
      if (runs.size) {
        log.info("waiting for running tasks", { count: runs.size, grace_ms: graceMs });
        let timer: ClockTimer | undefined;
        const timedOut = await Promise.race([
          all().then(() => false),
          new Promise<boolean>((r) => (timer = clock.setTimeout(() => r(true), graceMs))),
        ]);
        if (timer) clock.clearTimeout(timer);
        if (timedOut) {
          for (const r of runs.values()) {
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
      closed = true;
      reporter.stop();
      await reporter.settled();
      await Promise.all([...runs.values()].map((r) => r.done));
    },
  };
}
