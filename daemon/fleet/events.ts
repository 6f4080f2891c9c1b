// Fleet events to the tower (NodeService.PublishEvents with the node token): `inbox` for signals,
// `matrix` for cron fires and supervision, `progress` for signal runs. Sent in order, batched;
// while the tower is unreachable they wait in a bounded queue and are retried; one the tower
// refuses (outside the node's domains, say) is dropped with a warning.
import type { JsonObject } from "@bufbuild/protobuf";
import type { Clock, ClockTimer } from "../../common/clock.js";
import type { Logger } from "../../common/log.js";
import type { TowerClients } from "../link/tower-client.js";
import { refusedByTower } from "../worker/report.js";

export interface FleetEvent {
  type: "inbox" | "matrix" | "progress";
  name: string;
  domainId?: string;
  agentId?: string;
  status?: string;
  payload: JsonObject;
}

export interface EventPublisher {
  publish(event: FleetEvent): void;
  /** Sends what is queued; resolves when the queue is empty or a send failed. */
  flush(): Promise<void>;
  /** One last flush attempt, then stops retrying. */
  close(): Promise<void>;
}

export interface EventPublisherOptions {
  tower: Pick<TowerClients, "nodes">;
  clock: Clock;
  log: Logger;
  /** Queue bound; the oldest events are dropped beyond it (default 1000). */
  maxQueue?: number;
  retryMs?: number;
}

export function createEventPublisher(opts: EventPublisherOptions): EventPublisher {
  const max = opts.maxQueue ?? 1000;
  const retryMs = opts.retryMs ?? 5_000;
  let queue: FleetEvent[] = [];
  let sending: Promise<void> | undefined;
  let retry: ClockTimer | undefined;
  let closed = false;
  let dropped = 0;

  // after the tower refused a batch, its events go one at a time, so one it refuses does not hold the rest
  let alone = 0;

  async function sendAll(): Promise<void> {
    while (queue.length) {
      const batch = queue.slice(0, alone > 0 ? 1 : 200);
      try {
        await opts.tower.nodes.publishEvents({
          events: batch.map((e) => ({
            type: e.type,
            name: e.name,
            domainId: e.domainId ?? "",
            agentId: e.agentId ?? "",
            status: e.status ?? "",
            payload: e.payload,
          })),
        });
      } catch (err) {
        const refused = refusedByTower(err);
        if (!refused) {
          opts.log.debug("fleet events not published yet; will retry", {
            queued: queue.length,
            error: (err as Error).message,
          });
          if (!closed && !retry) {
            retry = opts.clock.setTimeout(() => {
              retry = undefined;
              void flush();
            }, retryMs);
          }
          return;
        }
        if (batch.length > 1) {
          alone = batch.length;
          continue;
        }
        // an answer, not a transport failure: sending it again would be refused again
        opts.log.warn("fleet event refused by the tower; dropped", {
          name: batch[0].name,
          domain_id: batch[0].domainId ?? "",
          error: refused.message,
        });
      }
      queue = queue.slice(batch.length);
      alone = Math.max(0, alone - batch.length);
    }
  }

  function flush(): Promise<void> {
    sending ??= sendAll().finally(() => (sending = undefined));
    return sending;
  }

  return {
    publish(event) {
      queue.push(event);
      if (queue.length > max) {
        dropped += queue.length - max;
        queue = queue.slice(queue.length - max);
        opts.log.warn("fleet event queue full; oldest events dropped", { dropped });
      }
      if (!retry) void flush();
    },
    flush,
    async close() {
      closed = true;
      if (retry) opts.clock.clearTimeout(retry);
      retry = undefined;
      await (sending ?? Promise.resolve());
      if (queue.length) await sendAll();
    },
  };
}
