// The event names a webhook may choose (docs/webhooks.md): the tower checks them, the console
// offers them. Browser-safe (no Node imports).
export const WEBHOOK_EVENTS = [
  "task.created",
  "task.succeeded",
  "task.failed",
  "task.cancelled",
  "task.requeued",
  "permission.requested",
  "permission.decided",
  "node.online",
  "node.offline",
] as const;
