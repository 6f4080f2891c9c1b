// The webhooks folder's face: the WebhookService, its dispatcher and settings. The rest of the
// folder is its own; other folders import only this (docs/architecture.md).
export { createWebhookDispatcher, type WebhookDispatcher } from "./webhook-dispatcher.js";
export { createWebhookService, resealWebhookSecrets, type WebhookServiceImpl } from "./webhook-service.js";
export { readWebhookSettings } from "./webhook-settings.js";
