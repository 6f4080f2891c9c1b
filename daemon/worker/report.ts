// Reporting a run's outcome to the tower, retried until it is acknowledged (with the journal
// keeping it across restarts) or the tower refuses it (the lease went elsewhere, the task was
// cancelled). While an outcome cannot get through, the lease is held with heartbeats.
import { ConnectError } from "@connectrpc/connect";
import { createBackoff, type BackoffOptions } from "../../common/backoff.js";
import type { Clock, ClockTimer } from "../../common/clock.js";
import { EpError, toEpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import { ErrorDetailSchema } from "../../gen/ep/errors/v1/errors_pb.js";
import { DenialSourceSchema, type DenialSchema, type DenialSource } from "../../gen/ep/tower/v1/resources_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { enumOf } from "../../common/vocab.js";
import type { Denial } from "../runtimes/denials.js";
import type { TowerClients } from "../link/tower-client.js";
import type { TowerLink } from "../link/tower-link.js";
import type { InflightEntry, Journal } from "./journal.js";

export interface OutcomeReporterDeps {
  tower: TowerClients;
  journal: Journal;
  clock: Clock;
  log: Logger;
  backoff?: BackoffOptions;
  /** the worker is closing: stop retrying (the entry stays in the journal for the next start) */
  closed(): boolean;
  /**
   * the agent runs nothing now and takes work: the outcome says so (agent_idle), and the tower hands it its next task
   */
  idleNow(agentId: string): boolean;
  /** the link, when it is a session: outcomes go up on it while it is up (else as CompleteTask/FailTask calls) */
  uplink?: () => Pick<TowerLink, "carriesOutcomes" | "report" | "progress"> | undefined;
}

export function createOutcomeReporter(deps: OutcomeReporterDeps) {
  const { tower, journal, clock, log } = deps;
  const reports = new Set<Promise<unknown>>();
  const retryTimers = new Set<{ timer: ClockTimer; wake(): void }>();
  const closed = () => deps.closed();

  /** Reports the outcome under its claim's lease, retried until the tower answers. */
  function deliver(entry: InflightEntry): Promise<void> {
    const p = report(entry).finally(() => reports.delete(p));
    reports.add(p);
    return p;
  }

  async function report(entry: InflightEntry): Promise<void> {
    await journal.put(entry);
    const o = entry.outcome!;
    const backoff = createBackoff(deps.backoff);
    const u = o.usage;
    const usage = u && {
      inputTokens: BigInt(Math.trunc(u.input_tokens)),
      outputTokens: BigInt(Math.trunc(u.output_tokens)),
      cachedInputTokens: BigInt(Math.trunc(u.cached_input_tokens)),
      costUsd: u.cost_usd,
      model: u.model,
    };
    const result = {
      output: o.output,
      exitCode: o.exitCode,
      error: o.error ?? "",
      ...(usage ? { usage } : {}),
      ...(o.workspace ? { workspace: o.workspace } : {}),
      denials: (o.denials ?? []).map(denialMsg),
    };
    const lease = { taskId: entry.taskId, agentId: entry.agentId, leaseId: entry.leaseId ?? "" };
    for (;;) {
      try {
        const call = { ...lease, result, agentIdle: deps.idleNow(entry.agentId) };
        const up = deps.uplink?.();
        if (up?.carriesOutcomes())
          await up.report(
            o.ok ? { case: "complete", value: call } : { case: "fail", value: { ...call, retryable: o.retryable } },
          );
        else if (o.ok) await tower.work.completeTask(call);
        else await tower.work.failTask({ ...call, retryable: o.retryable });
        break;
      } catch (err) {
        const refused = refusedByTower(err);
        if (refused) {
          // the tower decided otherwise (lease expired and requeued, claimed again, cancelled, gone): nothing to report
          // any more
          log.warn("outcome refused by the tower", {
            task_id: entry.taskId,
            code: refused.code,
            error: refused.message,
          });
          break;
        }
        const e = toEpError(err);
        if (closed()) return; // stays in the journal; the next start reports it
        // hold the lease while the outcome cannot get through (best effort: a tower that is down
        // answers neither; one that is up but unreachable on this path keeps the task ours)
        tower.work.heartbeatTask(lease).catch(() => undefined);
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
        if (closed()) return;
      }
    }
    await journal.remove(entry.taskId);
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
    /**
     * The tower is reachable again (a link opened): every report waiting to retry tries now, before its lease runs out.
     */
    retryNow() {
      for (const t of [...retryTimers]) t.wake();
    },
  };
}

/** A denial as the contract's Denial (its source word as DenialSource). */
function denialMsg(d: Denial): MessageInitShape<typeof DenialSchema> {
  return {
    tool: d.tool,
    tried: d.tried,
    reason: d.reason,
    source: enumOf<DenialSource>(DenialSourceSchema, d.source, "source"),
    callId: d.callId ?? "",
  };
}

/**
 * The tower's decision against a call, or undefined when there was none. A refusal is an answer
 * from the tower, which always names its EP error code; a transport failure (a reset or refused
 * connection, a tower killed mid-request: connect-node reports ECONNRESET as "aborted", which
 * would read as a conflict) or an overloaded or failing tower is never one, so the call is retried.
 */
export function refusedByTower(err: unknown): EpError | undefined {
  // an EpError is the tower's answer on the session (its ack); a ConnectError is one when it names EP's code
  if (!(err instanceof EpError) && (!(err instanceof ConnectError) || !err.findDetails(ErrorDetailSchema).length))
    return undefined;
  const e = toEpError(err);
  return ["unavailable", "internal", "rate_limited"].includes(e.errorClass) ? undefined : e;
}
