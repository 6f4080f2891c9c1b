// ep webhook add|ls|rm|test|deliveries: a domain's outgoing webhooks (docs/webhooks.md). The
// signing secret is printed once, by add; `test` queues a webhook.test delivery and waits for its
// first attempt, so an operator sees at once whether the receiver takes it.
import {
  CreateWebhookResponseSchema,
  ListWebhookDeliveriesResponseSchema,
  ListWebhooksResponseSchema,
  WebhookDeliverySchema,
  WebhookDeliveryStatus,
  WebhookFormat,
  WebhookService,
} from "../../gen/ep/tower/v1/webhooks_pb.js";
import { UsageError, type Context } from "../context.js";
import { json, table, type Row } from "../output.js";
import { protoJson, tower } from "../tower.js";
import { resolveDomains } from "./node.js";

const FORMATS: Record<string, WebhookFormat> = { ep: WebhookFormat.EP, slack: WebhookFormat.SLACK };
const STATUSES: Record<string, WebhookDeliveryStatus> = {
  pending: WebhookDeliveryStatus.PENDING,
  succeeded: WebhookDeliveryStatus.SUCCEEDED,
  failed: WebhookDeliveryStatus.FAILED,
};
/** How long `ep webhook test` waits for the first attempt (the tower's attempt time limit is 10 s by default). */
const TEST_WAIT_MS = 15_000;

async function domainOf(ctx: Context): Promise<string> {
  const ref = ctx.str("domain");
  if (!ref)
    throw new UsageError(`ep webhook ${ctx.spec.path[1]} needs --domain <id|name> (webhooks belong to a domain)`);
  return (await resolveDomains(ctx, [ref]))[0];
}

const attemptsText = (d: Row): string => `${d.attempts} attempt${d.attempts === 1 ? "" : "s"}`;

export async function run(ctx: Context): Promise<number> {
  const hooks = tower(ctx, WebhookService);
  const domainId = await domainOf(ctx);
  switch (ctx.spec.path[1]) {
    case "add": {
      // the receiver is an argument: --url is the tower's own address (a global option)
      const url = ctx.args[0];
      const events = ctx
        .list("event")
        .flatMap((e) => e.split(","))
        .map((e) => e.trim())
        .filter(Boolean);
      if (!events.length)
        throw new UsageError(
          "--event is required (repeat it or give a comma list, e.g. --event task.failed,permission.requested)",
        );
      const formatWord = ctx.str("format") ?? "ep";
      const format = FORMATS[formatWord];
      if (format === undefined)
        throw new UsageError(`--format must be ep or slack (got ${JSON.stringify(formatWord)})`);
      const res = protoJson(
        CreateWebhookResponseSchema,
        await hooks.createWebhook({ domainId, url, events, format, description: ctx.str("description") ?? "" }),
      );
      const w = res.webhook as Row;
      if (ctx.json) ctx.out(json(res));
      else {
        ctx.out(`added webhook ${w.id} → ${w.url} (${(w.events as string[]).join(", ")}; format ${w.format})`);
        ctx.out(`signing secret (shown only now; verify EP-Signature with it, docs/webhooks.md):\n${res.secret}`);
      }
      return 0;
    }
    case "ls": {
      const res = protoJson(ListWebhooksResponseSchema, await hooks.listWebhooks({ domainId }));
      if (ctx.json) ctx.out(json(res));
      else {
        const rows = (res.webhooks as Row[]).map((w) => ({ ...w, events: (w.events as string[]).join(",") }));
        ctx.out(
          table(rows, {
            id: "id",
            url: "url",
            events: "events",
            format: "format",
            description: "description",
            by: "created_by",
            created: "create_time",
          }),
        );
      }
      return 0;
    }
    case "rm": {
      const webhookId = ctx.args[0];
      await hooks.deleteWebhook({ domainId, webhookId });
      ctx.out(ctx.json ? json({ deleted: webhookId }) : `deleted webhook ${webhookId} and its delivery log`);
      return 0;
    }
    case "test":
      return test(ctx, domainId, ctx.args[0]);
    default: {
      const statusWord = ctx.str("status");
      const status = statusWord === undefined ? WebhookDeliveryStatus.UNSPECIFIED : STATUSES[statusWord];
      if (status === undefined)
        throw new UsageError(`--status must be pending, succeeded or failed (got ${JSON.stringify(statusWord)})`);
      const limitWord = ctx.str("limit") ?? "20";
      if (!/^\d+$/.test(limitWord) || Number(limitWord) < 1 || Number(limitWord) > 1000)
        throw new UsageError(`--limit must be a whole number from 1 to 1000 (got ${JSON.stringify(limitWord)})`);
      const res = protoJson(
        ListWebhookDeliveriesResponseSchema,
        await hooks.listWebhookDeliveries({ domainId, webhookId: ctx.args[0], status, pageSize: Number(limitWord) }),
      );
      if (ctx.json) ctx.out(json(res));
      else {
        const rows = (res.deliveries as Row[]).map((d) => ({
          ...d,
          code: d.status_code || "-",
          next: d.status === "pending" ? d.next_attempt_time : "",
        }));
        ctx.out(
          table(rows, {
            id: "id",
            event: "event_name",
            status: "status",
            attempts: "attempts",
            code: "code",
            error: "error",
            created: "create_time",
            next: "next",
          }),
        );
      }
      return 0;
    }
  }
}

async function test(ctx: Context, domainId: string, webhookId: string): Promise<number> {
  const hooks = tower(ctx, WebhookService);
  const queued = (await hooks.testWebhook({ domainId, webhookId })).delivery!;
  const deadline = Date.now() + TEST_WAIT_MS;
  for (;;) {
    const [d] = (await hooks.listWebhookDeliveries({ domainId, webhookId, deliveryId: queued.id })).deliveries;
    const shown = d && (protoJson(WebhookDeliverySchema, d) as Row);
    if (shown && (d.status !== WebhookDeliveryStatus.PENDING || d.attempts > 0)) {
      if (ctx.json) ctx.out(json({ delivery: shown }));
      else if (d.status === WebhookDeliveryStatus.SUCCEEDED)
        ctx.out(`delivered ${d.id}: the receiver answered ${d.statusCode}`);
      else {
        const retrying =
          d.status === WebhookDeliveryStatus.PENDING
            ? `; retrying (see 'ep webhook deliveries ${webhookId} --domain ${domainId}')`
            : "";
        ctx.out(`delivery ${d.id} failed (${attemptsText(shown)}): ${d.error}${retrying}`);
      }
      return d.status === WebhookDeliveryStatus.SUCCEEDED ? 0 : 1;
    }
    if (Date.now() > deadline) {
      ctx.err(
        `delivery ${queued.id} is queued but not tried within ${TEST_WAIT_MS / 1000} ` +
          `s; see 'ep webhook deliveries ${webhookId} --domain ${domainId}'`,
      );
      return 1;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}
