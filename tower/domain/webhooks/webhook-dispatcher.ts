// The webhook dispatcher: off the work path, driven by the committed event log. It wires the
// reader (event log → delivery rows, webhook-reader.ts) to the sender (due rows → signed POSTs,
// webhook-sender.ts), polls both every EP_WEBHOOK_POLL_MS (other replicas' events, retries that
// came due) and prunes finished deliveries past their retention. What is queued is in the store,
// so a restart resumes it; nothing on the work path waits for any of it.
import type { Clock, ClockTimer } from "../../../common/clock.js";
import { iso } from "../../../common/clock.js";
import type { Logger } from "../../../common/log.js";
import type { Store } from "../../store/store.js";
import type { EventHub } from "../event-hub.js";
import type { KeySource } from "../secrets/index.js";
import { createWebhookReader } from "./webhook-reader.js";
import { createWebhookSender } from "./webhook-sender.js";
import type { WebhookSettings } from "./webhook-settings.js";

/** Finished deliveries are pruned at most this often. */
const PRUNE_EVERY_MS = 600_000;

export interface WebhookDispatcherDeps {
  store: Store;
  hub: EventHub;
  clock: Clock;
  log: Logger;
  keys: KeySource;
  settings: WebhookSettings;
  /** PostgreSQL replicas: run fn unless another replica is running it now (replication.tryExclusive) */
  exclusive?: <T>(name: string, fn: () => Promise<T>) => Promise<T | undefined>;
}

export interface WebhookDispatcher {
  /** Reads the log and sends what is due now (a test delivery was queued). */
  kick(): void;
  /** Resolves when nothing is being read or sent (tests, shutdown). */
  idle(): Promise<void>;
  close(): Promise<void>;
}

export function createWebhookDispatcher(deps: WebhookDispatcherDeps): WebhookDispatcher {
  const { store, clock, log, settings } = deps;
  const sender = createWebhookSender(deps);
  const reader = createWebhookReader({ ...deps, exclusive: deps.exclusive ?? ((_name, fn) => fn()) }, () =>
    sender.pump(),
  );
  let closed = false;
  let nextPruneAt = 0;
  let timer: ClockTimer | undefined;

  async function prune(): Promise<void> {
    const now = clock.now();
    if (now < nextPruneAt) return;
    nextPruneAt = now + PRUNE_EVERY_MS;
    const n = await store.pruneWebhookDeliveries(iso(now - settings.retentionMs));
    if (n) log.info("old webhook deliveries pruned", { count: n });
  }

  function tick(): void {
    timer = undefined;
    if (closed) return;
    reader.read();
    sender.pump();
    prune().catch((err: Error) => log.warn("webhook deliveries not pruned", { error: err.message }));
    timer = clock.setTimeout(tick, settings.pollMs);
  }
  tick();

  return {
    kick() {
      reader.read();
      sender.pump();
    },
    async idle() {
      await reader.idle();
      await sender.idle();
    },
    async close() {
      closed = true;
      if (timer) clock.clearTimeout(timer);
      await reader.close();
      await sender.close();
    },
  };
}
