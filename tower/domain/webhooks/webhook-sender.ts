// The dispatcher's sender: takes due deliveries under a lease (FOR UPDATE SKIP LOCKED on
// PostgreSQL, so replicas never take the same row), at most `concurrency` in flight, POSTs each
// signed (webhook-attempt.ts) and records the attempt, which releases the lease. A dead or slow
// receiver holds only a sender slot. When the tower stops, attempts in flight are cut off and
// released uncounted, so the next start sends them at once.
import type { Clock } from "../../../common/clock.js";
import { iso } from "../../../common/clock.js";
import { newId } from "../../../common/ids.js";
import type { Logger } from "../../../common/log.js";
import type { Store } from "../../store/store.js";
import type { DeliveryRow, WebhookRow } from "../../store/webhook-store.js";
import { type KeySource, decryptSecret } from "../secrets/index.js";
import { attemptHeaders, createReceiverAgents, outcomeOf, postDelivery } from "./webhook-attempt.js";
import { sealName } from "./webhook-service.js";
import type { WebhookSettings } from "./webhook-settings.js";
import { serialRunner } from "./serial-runner.js";

export interface WebhookSenderDeps {
  store: Store;
  clock: Clock;
  log: Logger;
  keys: KeySource;
  settings: WebhookSettings;
}

export interface WebhookSender {
  /** Takes due deliveries while there is room in flight, and sends them. */
  pump(): void;
  /** Resolves when nothing is being taken or sent. */
  idle(): Promise<void>;
  close(): Promise<void>;
}

export function createWebhookSender(deps: WebhookSenderDeps): WebhookSender {
  const { store, clock, log, settings } = deps;
  // long enough for an attempt and its record; a replica that died mid-attempt frees it after this
  const leaseMs = settings.timeoutMs * 2 + 30_000;
  const replica = newId("whd").slice(4, 14);
  const agents = createReceiverAgents(settings.concurrency);
  /** aborts the attempts in flight when the tower stops */
  const stopping = new AbortController();
  const sending = new Set<Promise<void>>();
  let closed = false;

  const runner = serialRunner(async () => {
    try {
      while (!closed && sending.size < settings.concurrency) {
        const now = clock.now();
        const leaseId = `${replica}:${newId("whd", now)}`;
        const due = await store.claimWebhookDeliveries(
          iso(now),
          leaseId,
          iso(now + leaseMs),
          settings.concurrency - sending.size,
        );
        if (!due.length) break;
        // one read per webhook of the batch, not one per delivery
        const hooks = new Map<string, WebhookRow | undefined>();
        for (const id of new Set(due.map((d) => d.webhookId))) hooks.set(id, await store.getWebhook(id));
        for (const d of due) start(d, leaseId, hooks.get(d.webhookId));
      }
    } catch (err) {
      log.warn("webhook sender could not take due deliveries (it tries again)", { error: (err as Error).message });
    }
  });

  function start(d: DeliveryRow, leaseId: string, hook: WebhookRow | undefined): void {
    const p: Promise<void> = attempt(d, leaseId, hook)
      .catch((err: Error) =>
        log.warn("webhook attempt not recorded (its lease runs out and it is tried again)", {
          delivery_id: d.id,
          error: err.message,
        }),
      )
      .finally(() => {
        sending.delete(p);
        runner.run();
      });
    sending.add(p);
  }

  async function attempt(d: DeliveryRow, leaseId: string, hook: WebhookRow | undefined): Promise<void> {
    if (!hook) return; // deleted meanwhile, its deliveries with it
    const startedAt = clock.now();
    const secret = openSecret(hook);
    const result =
      typeof secret === "string"
        ? await postDelivery(
            agents,
            hook.url,
            attemptHeaders(hook, d, secret, startedAt, d.attempts + 1),
            d.body,
            settings.timeoutMs,
            stopping.signal,
          )
        : { statusCode: 0, error: secret.error };
    if (closed) {
      // cut off by the tower stopping: not an attempt; released so the next start sends it at once
      await store.finishWebhookAttempt(d.id, leaseId, { ...d, nextAttemptAt: iso(clock.now()) });
      return;
    }
    const outcome = outcomeOf(
      d,
      {
        at: iso(clock.now()),
        statusCode: result.statusCode,
        error: result.error,
        durationMs: Math.max(0, clock.now() - startedAt),
      },
      settings,
    );
    if (!(await store.finishWebhookAttempt(d.id, leaseId, outcome)))
      log.warn("webhook attempt outlived its lease; another replica may send it again", { delivery_id: d.id });
    if (outcome.status === "failed")
      log.warn("webhook delivery failed for good", {
        delivery_id: d.id,
        webhook_id: hook.id,
        attempts: outcome.attempts,
        error: outcome.error,
      });
  }

  function openSecret(hook: WebhookRow): string | { error: string } {
    const ring = deps.keys.keyring();
    if (!ring) return { error: `no secret-store key to sign with: ${deps.keys.hint}` };
    try {
      return decryptSecret(ring, sealName(hook.id), hook);
    } catch (err) {
      return { error: (err as Error).message };
    }
  }

  return {
    pump: () => runner.run(),
    async idle() {
      await runner.idle();
      while (sending.size) await Promise.allSettled([...sending]);
    },
    async close() {
      closed = true;
      runner.stop();
      stopping.abort();
      await runner.idle();
      await Promise.allSettled([...sending]);
      agents.destroy();
    },
  };
}
