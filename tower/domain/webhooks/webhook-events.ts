// Which events a webhook may choose, and what a delivery's body says. The names are the event
// log's own (docs/events.md, "Event names"); a webhook receives those of its domain. A node's
// events carry no domain: they reach the webhooks of every domain the node serves.
import type { EventRow } from "../../store/store.js";
import type { WebhookFormatName } from "../../store/webhook-store.js";
import { chunkOf } from "../events/index.js";

import { WEBHOOK_EVENTS } from "../../../common/webhook-events.js";

export { WEBHOOK_EVENTS };

/** What `ep webhook test` sends; not an event of the log. */
export const TEST_EVENT = "webhook.test";

/** The event types those names have (the dispatcher reads only these from the log). */
export const WEBHOOK_EVENT_TYPES = ["matrix", "approval"];

const KNOWN = new Set<string>(WEBHOOK_EVENTS);
export const isWebhookEvent = (name: string): boolean => KNOWN.has(name);

/** The body of one delivery, as signed and sent. */
export function deliveryBody(
  format: WebhookFormatName,
  ids: { webhookId: string; deliveryId: string },
  chunk: Record<string, unknown>,
): string {
  if (format === "slack") return JSON.stringify(slackMessage(chunk));
  return JSON.stringify({ webhook_id: ids.webhookId, delivery_id: ids.deliveryId, event: chunk });
}

/** The event as the SSE feed sends it. */
export const eventChunk = (row: EventRow): Record<string, unknown> => chunkOf(row);

/** A test event: the shape of a real one, named webhook.test. */
export function testChunk(domainId: string, webhookId: string, at: string): Record<string, unknown> {
  return {
    id: 0,
    type: "matrix",
    name: TEST_EVENT,
    domain_id: domainId,
    mission_id: "",
    agent_id: "",
    task_id: "",
    session_id: "",
    status: "",
    payload: { webhook_id: webhookId, message: "a test delivery from ep webhook test" },
    created_at: at,
  };
}

type Chunk = Record<string, unknown>;
const str = (v: unknown): string =>
  typeof v === "string" ? v : v === undefined || v === null ? "" : JSON.stringify(v);

/** One line saying what happened, for people (Slack's `text`, its notification and fallback). */
export function summaryOf(chunk: Chunk): string {
  const p = (chunk.payload ?? {}) as Chunk;
  const task = str(p.title) ? `"${str(p.title)}"` : str(chunk.task_id);
  switch (chunk.name) {
    case "task.succeeded":
      return `Task ${task} succeeded`;
    case "task.failed":
      return `Task ${task} failed${str(p.reason) ? `: ${str(p.reason)}` : ""}`;
    case "task.cancelled":
      return `Task ${task} was cancelled${str(p.reason) ? `: ${str(p.reason)}` : ""}`;
    case "task.requeued":
      return `Task ${task} went back to the queue${str(p.reason) ? `: ${str(p.reason)}` : ""}`;
    case "task.created":
      return `Task ${task} was created`;
    case "permission.requested":
      return (
        `An agent asks to run ${str(p.tool)}${str(p.title) ? `: ${str(p.title)}` : ""} ` +
        `(approve or reject with 'ep approvals')`
      );
    case "permission.decided":
      return (
        `The request to run ${str(p.tool)} was ` +
        `${str(p.status)}${str(p.decided_by) ? ` by ${str(p.decided_by)}` : ""}`
      );
    case "node.online":
      return `Node ${str(p.node_id)} is online`;
    case "node.offline":
      return `Node ${str(p.node_id)} went offline`;
    case TEST_EVENT:
      return "Test delivery from EP: this webhook works";
    default:
      return `${str(chunk.name)}`;
  }
}

/** Slack's incoming-webhook message: `text` (notifications, fallback) and Block Kit `blocks`. */
export function slackMessage(chunk: Chunk): { text: string; blocks: unknown[] } {
  const text = summaryOf(chunk);
  const facts = [
    ["event", chunk.name],
    ["domain", chunk.domain_id],
    ["mission", chunk.mission_id],
    ["task", chunk.task_id],
    ["agent", chunk.agent_id],
  ].filter(([, v]) => typeof v === "string" && v !== "");
  return {
    text,
    blocks: [
      { type: "section", text: { type: "mrkdwn", text: escapeMrkdwn(text) } },
      {
        type: "context",
        elements: facts.map(([k, v]) => ({ type: "mrkdwn", text: `*${k}* \`${escapeMrkdwn(String(v))}\`` })),
      },
    ],
  };
}

/** Slack's mrkdwn treats &, < and > as markup: escaped as it asks. */
function escapeMrkdwn(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}
