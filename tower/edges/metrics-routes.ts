// /metrics in Prometheus's text format (docs/metrics.md). On the public port it is a door like
// the others: a bearer token of a person's role (admin, operator, viewer; a viewer token is what
// a scraper needs), so an anonymous caller gets 401 and a node's or an agent's token 403. With
// EP_METRICS_LISTEN the tower also serves it on a second, plain-HTTP address without a token,
// for a Prometheus on a private network; that address serves nothing else (common/metrics-server.ts).
import type { FastifyInstance } from "fastify";
import { authorizeRoute } from "../domain/door-roles.js";
import type { Caller } from "../domain/caller.js";
import type { TowerMetrics } from "../metrics/tower-metrics.js";

/** GET /metrics on the app, and every answered request counted by route template and code. */
export function registerMetricsRoutes(app: FastifyInstance, metrics: TowerMetrics): void {
  app.addHook("onResponse", (req, reply, done) => {
    metrics.http(req.method, req.routeOptions.url, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
  app.get("/metrics", async (req, reply) => {
    authorizeRoute(req.caller as Caller, "GET /metrics");
    const text = await metrics.render();
    return reply.type(metrics.contentType).send(text);
  });
}
