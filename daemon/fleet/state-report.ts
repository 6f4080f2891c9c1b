// Pushes the node's cron jobs and supervised agents to the tower (NodeService.ReportNodeState):
// soon after anything changes (a fire, a watchdog step, a reload, a new link) and every
// `intervalMs` anyway, so the tower's copy is never older than the interval while the node is
// up. Pushes never overlap; triggers during a push coalesce into one more push after it.
// A failed push is logged and retried at the next trigger or period.
import type { Clock, ClockTimer } from "../../common/clock.js";
import type { Logger } from "../../common/log.js";

export interface StateReporterDeps<T> {
  clock: Clock;
  log: Logger;
  /** Periodic push (EP_NODE_STATE_MS, default 60000). */
  intervalMs: number;
  /** Coalesces bursts of changes (default 250 ms). */
  debounceMs?: number;
  snapshot(): Promise<T> | T;
  send(state: T): Promise<unknown>;
}

export interface StateReporter {
  /** Starts the periodic push and pushes once now. */
  start(): void;
  /** Something changed: push soon. */
  changed(): void;
  /** Pushes now and resolves when done (tests, shutdown). */
  flush(): Promise<void>;
  close(): void;
}

export function createStateReporter<T>(deps: StateReporterDeps<T>): StateReporter {
  const { clock, log } = deps;
  const debounceMs = deps.debounceMs ?? 250;
  let soon: ClockTimer | undefined;
  let periodic: ClockTimer | undefined;
  let running: Promise<void> | undefined;
  let again = false;
  let closed = false;
  let failing = false;

  async function pushOnce(): Promise<void> {
    try {
      await deps.send(await deps.snapshot());
      if (failing) log.info("node state report delivered again");
      failing = false;
    } catch (err) {
      // once per outage at warn, then quietly until it works again
      if (!failing) log.warn("node state report not delivered; retrying later", { error: (err as Error).message });
      failing = true;
    }
  }

  function push(): Promise<void> {
    if (closed) return Promise.resolve();
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        await pushOnce();
      } while (again && !closed);
      running = undefined;
    })();
    return running;
  }

  function schedulePeriodic() {
    if (closed) return;
    periodic = clock.setTimeout(() => {
      void push().finally(schedulePeriodic);
    }, deps.intervalMs);
  }

  return {
    start() {
      void push();
      schedulePeriodic();
    },
    changed() {
      if (closed || soon) return;
      soon = clock.setTimeout(() => {
        soon = undefined;
        void push();
      }, debounceMs);
    },
    flush: () => push(),
    close() {
      closed = true;
      if (soon) clock.clearTimeout(soon);
      if (periodic) clock.clearTimeout(periodic);
    },
  };
}
