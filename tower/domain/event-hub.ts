// In-process fan-out of committed events. Events are appended to the store inside
// the transaction that changes state, and published here only after it commits.
import type { EventRow, NewEvent, Store } from "../store/store.js";
import type { Clock } from "../../common/clock.js";
import { iso } from "../../common/clock.js";

export type EventListener = (events: readonly EventRow[]) => void;

export interface EventHub {
  /**
   * Hands committed events to every listener. An id already published is dropped, so the
   * same event arriving twice (committed here and relayed from the database by the
   * replication, tower/domain/replication/replication.ts) reaches the listeners once.
   */
  publish(events: readonly EventRow[]): void;
  subscribe(listener: EventListener): () => void;
  /** Highest event id published so far in this process (or seen from another replica). */
  readonly lastId: number;
}

/**
 * How far below the newest id the hub remembers what it published. A duplicate can only come
 * from the few milliseconds between a commit and its local publish, so this is generous; an
 * id further back than this is taken as already published.
 */
export const HUB_DEDUP_WINDOW = 65_536;

/**
 * `onListenerError`: a listener threw (a bug in it); the others still get the events. The tower
 * logs it; without a handler it is written to stderr, never swallowed.
 */
export function createEventHub(opts: { onListenerError?: (err: unknown) => void } = {}): EventHub {
  const onListenerError = opts.onListenerError ?? ((err: unknown) => console.error("event listener failed:", err));
  const listeners = new Set<EventListener>();
  let lastId = 0;
  /** ids published with id > floor, in publish order (roughly ascending) */
  const seen = new Set<number>();
  let floor = 0;

  function fresh(events: readonly EventRow[]): readonly EventRow[] {
    let out: EventRow[] | undefined;
    for (let i = 0; i < events.length; i++) {
      const id = events[i].id;
      const dup = id <= floor || seen.has(id);
      if (dup && !out) out = events.slice(0, i);
      else if (!dup) {
        seen.add(id);
        if (id > lastId) lastId = id;
        out?.push(events[i]);
      }
    }
    if (seen.size > 2 * HUB_DEDUP_WINDOW) {
      floor = Math.max(floor, lastId - HUB_DEDUP_WINDOW);
      for (const id of seen) if (id <= floor) seen.delete(id);
    }
    return out ?? events;
  }

  return {
    publish(all) {
      if (!all.length) return;
      const events = fresh(all);
      if (!events.length) return;
      for (const l of listeners) {
        try {
          l(events);
        } catch (err) {
          // a listener's failure must not stop delivery to the others
          onListenerError(err);
        }
      }
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    get lastId() {
      return lastId;
    },
  };
}

/** Collects events during a transaction; they are written in it and published after it commits. */
export type Emit = (event: NewEvent) => void;

export async function commit<T>(
  deps: { store: Store; hub: EventHub; clock: Clock },
  fn: (tx: Store, emit: Emit) => Promise<T>,
): Promise<T> {
  let written: EventRow[] = [];
  const out = await deps.store.transaction(async (tx) => {
    const pending: NewEvent[] = [];
    const result = await fn(tx, (e) => pending.push(e));
    // the last statement: PostgreSQL sends the COMMIT in the same round trip, so the event-order
    // lock the insert takes is held for the commit alone, not for a round trip to this process
    if (pending.length)
      written = await (tx.appendFinalEvents ?? tx.appendEvents).call(tx, pending, iso(deps.clock.now()));
    return result;
  });
  deps.hub.publish(written);
  return out;
}
