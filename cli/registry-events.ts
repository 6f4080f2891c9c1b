// `ep events` and `ep webhook`: what happens in a domain, followed live or sent out (a part of
// the command table, registry.ts; data only).
import { domainOpt, type CommandSpec, type OptionSpec } from "./command-spec.js";

const webhookDomainOpt: OptionSpec = {
  name: "domain",
  type: "string",
  value: "<id|name>",
  desc: "the webhook's domain, by id or name (required)",
};

export const EVENT_COMMANDS: CommandSpec[] = [
  // --- events ---
  {
    path: ["events", "tail"],
    summary: "follow the event stream (reconnects with backoff and resumes by id)",
    usage: "[--type <t>]… [--domain <id>] [--mission <id>] [--since <id>] [--limit <n>]",
    example: "ep events tail --type approval --type matrix --json",
    module: "events",
    options: [
      {
        name: "type",
        type: "string",
        multiple: true,
        value: "<type>",
        desc: "approval, inbox, matrix or progress (repeatable)",
      },
      domainOpt,
      { name: "mission", type: "string", value: "<id>", desc: "mission id" },
      { name: "since", type: "string", value: "<id>", desc: "start after this event id" },
      { name: "limit", type: "string", value: "<n>", desc: "exit after this many events" },
    ],
  },
  // --- webhooks: notifications out of a domain (docs/webhooks.md) ---
  {
    path: ["webhook", "add"],
    summary: "POST a domain's chosen events to a URL, signed (the signing secret is shown once)",
    usage: "<url> --domain <id|name> --event <name>… [--format ep|slack] [--description <text>]",
    example: "ep webhook add https://hooks.example.com/ep --domain demo --event task.failed,permission.requested",
    module: "webhook",
    args: { min: 1 },
    options: [
      webhookDomainOpt,
      {
        name: "event",
        type: "string",
        multiple: true,
        value: "<name>",
        desc:
          "an event to send, repeatable or a comma list: task.created, task.succeeded, task.failed, " +
          "task.cancelled, task.requeued, permission.requested, permission.decided, node.online, node.offline",
      },
      {
        name: "format",
        type: "string",
        value: "ep|slack",
        desc: "body: ep (the event as JSON, default) or slack (text + blocks, for a Slack incoming webhook)",
      },
      { name: "description", type: "string", value: "<text>", desc: "what the webhook is for" },
    ],
  },
  {
    path: ["webhook", "ls"],
    summary: "list a domain's webhooks (viewers see each URL's origin only)",
    usage: "--domain <id|name>",
    example: "ep webhook ls --domain demo",
    module: "webhook",
    options: [webhookDomainOpt],
  },
  {
    path: ["webhook", "rm"],
    summary: "delete a webhook and its delivery log",
    usage: "<webhook-id> --domain <id|name>",
    example: "ep webhook rm whk_01 --domain demo",
    module: "webhook",
    args: { min: 1 },
    options: [webhookDomainOpt],
  },
  {
    path: ["webhook", "test"],
    summary: "send a webhook.test delivery now and wait for the receiver's answer (exit 1 if it failed)",
    usage: "<webhook-id> --domain <id|name>",
    example: "ep webhook test whk_01 --domain demo",
    module: "webhook",
    args: { min: 1 },
    options: [webhookDomainOpt],
  },
  {
    path: ["webhook", "deliveries"],
    summary: "a webhook's delivery log, newest first: status, attempts, the last answer and error",
    usage: "<webhook-id> --domain <id|name> [--status pending|succeeded|failed] [--limit <n>]",
    example: "ep webhook deliveries whk_01 --domain demo --status failed",
    module: "webhook",
    args: { min: 1 },
    options: [
      webhookDomainOpt,
      { name: "status", type: "string", value: "<status>", desc: "only pending, succeeded or failed deliveries" },
      { name: "limit", type: "string", value: "<n>", desc: "how many, newest first (default 20, at most 1000)" },
    ],
  },
];
