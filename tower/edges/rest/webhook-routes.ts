// REST for a domain's webhooks (docs/webhooks.md), as thin shims over WebhookService: the same
// request messages, decoded from snake_case JSON and the path.
import type { DescMessage } from "@bufbuild/protobuf";
import * as pb from "../../../gen/ep/tower/v1/webhooks_pb.js";
import type { WebhookServiceImpl } from "../../domain/webhooks/index.js";
import { PAGE, route, type RestRoute } from "./work-routes.js";

export function webhookRoutes(hooks: WebhookServiceImpl): RestRoute<DescMessage, DescMessage>[] {
  const base = "/domains/:domain_id/webhooks";
  const routes = [
    route({
      method: "GET",
      url: base,
      input: pb.ListWebhooksRequestSchema,
      output: pb.ListWebhooksResponseSchema,
      query: PAGE,
      call: hooks.listWebhooks,
    }),
    route({
      method: "POST",
      url: base,
      status: 201,
      input: pb.CreateWebhookRequestSchema,
      output: pb.CreateWebhookResponseSchema,
      call: hooks.createWebhook,
    }),
    route({
      method: "DELETE",
      url: `${base}/:webhook_id`,
      input: pb.DeleteWebhookRequestSchema,
      output: pb.DeleteWebhookResponseSchema,
      call: hooks.deleteWebhook,
    }),
    route({
      method: "POST",
      url: `${base}/:webhook_id/test`,
      input: pb.TestWebhookRequestSchema,
      output: pb.TestWebhookResponseSchema,
      call: hooks.testWebhook,
    }),
    route({
      method: "GET",
      url: `${base}/:webhook_id/deliveries`,
      input: pb.ListWebhookDeliveriesRequestSchema,
      output: pb.ListWebhookDeliveriesResponseSchema,
      query: ["status", "delivery_id", ...PAGE],
      call: hooks.listWebhookDeliveries,
    }),
  ];
  return routes as unknown as RestRoute<DescMessage, DescMessage>[];
}
