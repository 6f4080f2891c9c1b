// Reporting a run's outcome to the tower, retried until it is acknowledged (with the journal
// keeping it across restarts) or the tower refuses it (the lease went elsewhere, the task was
// cancelled). While an outcome cannot get through, the lease is held with heartbeats.
import { ConnectError } from "@connectrpc/connect";
import { createBackoff, type BackoffOptions } from "../../common/backoff.js";
import type { Clock, ClockTimer } from "../../common/clock.js";
import { toEpError, type EpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import { ErrorDetailSchema } from "../../gen/ep/errors/v1/errors_pb.js";
import { DenialSourceSchema, type DenialSchema, type DenialSource, type Task } from "../../gen/ep/tower/v1/resources_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { enumOf } from "../../common/vocab.js";
import type { Denial } from "../runtimes/denials.js";
import type { TowerClients } from "../link/tower-client.js";
import type { InflightEntry, Journal } from "./journal.js";

export interface OutcomeReporterDeps {
  tower: TowerClients;
  journal: Journal;
  clock: Clock;
  log: Logger;
  backoff?: BackoffOptions;
  /** the worker is closing: stop retrying (the entry stays in the journal for the next start) */
  closed(): boolean;
  /** the worker is stopping: outcomes leave the agent busy at the tower, which pushes it no new task */
  stopping?(): boolean;
  /** the tower took the outcome (and, with it, marked the agent idle, or busy with `next`) */
  acknowledged?(entry: InflightEntry, next: Task | undefined): void;
  /**
   * the outcome's first attempt, which also claimed the agent's next task, got no answer: that task
   * may be held for the agent already (the agent's next claim asks for it first, ClaimTask resume)
   */
  nextMayBeHeld?(entry: InflightEntry): void;
}

export function createOutcomeReporter(deps: OutcomeReporterDeps) {
  const { tower, journal, clock, log } = deps;
  const reports = new Set<Promise<unknown>>();
  const retryTimers = new Set<{ timer: ClockTimer; wake(): void }>();
  const closed = () => deps.closed();


/**
 * Reports the outcome; with `claimNext` the first attempt also claims the agent's next task in
 * the same commit (CompleteTask/FailTask claim_next), which comes back started. Only the first:
 * when its answer is lost, a retry must not claim a second one; the first, if it was claimed, is
 * taken up by the agent's next claim (nextMayBeHeld: it resumes), like a claim whose answer was lost.
 */
function deliver(entry: InflightEntry, claimNext = false): Promise<Task | undefined> {
  const p = report(entry, claimNext).finally(() => reports.delete(p));
  reports.add(p);
  return p;
}

async function report(entry: InflightEntry, claimNext: boolean): Promise<Task | undefined> {
  await journal.put(entry);
  const o = entry.outcome!;
  const backoff = createBackoff(deps.backoff);
  const u = o.usage;
  const usage = u && { inputTokens: BigInt(Math.trunc(u.input_tokens)), outputTokens: BigInt(Math.trunc(u.output_tokens)), cachedInputTokens: BigInt(Math.trunc(u.cached_input_tokens)), costUsd: u.cost_usd, model: u.model };
  const result = { output: o.output, exitCode: o.exitCode, error: o.error ?? "", ...(usage ? { usage } : {}), ...(o.workspace ? { workspace: o.workspace } : {}), denials: (o.denials ?? []).map(denialMsg) };
  let next: Task | undefined;
  for (let first = true; ; first = false) {
    try {
      // agentIdle: the tower marks the agent idle in the same commit (no UpdateAgentState call),
      // unless epd is stopping (an idle agent gets work pushed); brief: the answer carries no copy of the task
      const call = { taskId: entry.taskId, agentId: entry.agentId, result, agentIdle: !deps.stopping?.(), brief: true, claimNext: claimNext && first };
      next = (o.ok ? await tower.work.completeTask(call) : await tower.work.failTask({ ...call, retryable: o.retryable })).next;
      deps.acknowledged?.(entry, next);
      break;
    } catch (err) {
      const refused = refusedByTower(err);
      if (refused) {
        // the tower decided otherwise (lease expired and requeued, cancelled, gone): nothing to report any more
        log.warn("outcome refused by the tower", { task_id: entry.taskId, code: refused.code, error: refused.message });
        break;
      }
      const e = toEpError(err);
      if (claimNext && first) deps.nextMayBeHeld?.(entry);
      if (closed()) return undefined; // stays in the journal; the next start reports it
      // hold the lease while the outcome cannot get through (best effort: a tower that is down
      // answers neither; one that is up but unreachable on this path keeps the task ours)
      tower.work.heartbeatTask({ taskId: entry.taskId, agentId: entry.agentId }).catch(() => undefined);
      const delay = backoff.next();
      log.warn("outcome not acknowledged; retrying", { task_id: entry.taskId, in_ms: delay, error: e.message });
      await new Promise<void>((resolve) => {
        const t = {
          timer: clock.setTimeout(() => t.wake(), delay),
          wake: () => {
            clock.clearTimeout(t.timer);
            retryTimers.delete(t);
            resolve();
          },
        };
        retryTimers.add(t);
      });
      if (closed()) return undefined;
    }
  }
  await journal.remove(entry.taskId);
  return next;
}

  return {
    /** Reports the entry's outcome (in the background; the promise settles when it is done). */
    deliver,
    /** Reports still under way. */
    pending: () => reports.size,
    settled: () => Promise.all([...reports]).then(() => undefined),
    /** Ends the waits between retries (closing): each report returns, its entry stays journaled. */
    stop() {
      for (const t of [...retryTimers]) t.wake();
    },
  };
}

/** A denial as the contract's Denial (its source word as DenialSource). */
function denialMsg(d: Denial): MessageInitShape<typeof DenialSchema> {
  return { tool: d.tool, tried: d.tried, reason: d.reason, source: enumOf<DenialSource>(DenialSourceSchema, d.source, "source"), callId: d.callId ?? "" };
}

/**
 * The tower's decision against a call, or undefined when there was none. A refusal is an answer
 * from the tower, which always names its EP error code; a transport failure (a reset or refused
 * connection, a tower killed mid-request: connect-node reports ECONNRESET as "aborted", which
 * would read as a conflict) or an overloaded or failing tower is never one, so the call is retried.
 */
export function refusedByTower(err: unknown): EpError | undefined {
  if (!(err instanceof ConnectError) || !err.findDetails(ErrorDetailSchema).length) return undefined;
  const e = toEpError(err);
  return ["unavailable", "internal", "rate_limited"].includes(e.errorClass) ? undefined : e;
}
