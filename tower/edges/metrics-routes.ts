// /metrics in Prometheus's text format (docs/metrics.md). On the public port it is a door like
// the others: a bearer token of a person's role (admin, operator, viewer; a viewer token is what
// a scraper needs), so an anonymous caller gets 401 and a node's or an agent's token 403. With
// EP_METRICS_LISTEN the tower also serves it on a second, plain-HTTP address without a token,
// for a Prometheus on a private network; that address serves nothing else.
import type { FastifyInstance } from "fastify";
import { createServer, type Server } from "node:http";
import { EpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
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

/** The metrics-only listener on `listen`; resolves once it listens. */
export async function serveMetrics(listen: { host: string; port: number }, metrics: TowerMetrics, log: Logger): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?", 1)[0];
    const refuse = (status: number, ep: EpError, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "content-type": "application/json", ...headers });
      res.end(JSON.stringify(ep.toJSON()));
    };
    if (path !== "/metrics") return refuse(404, new EpError("route_not_found", `this address serves only GET /metrics (not ${path})`));
    if (req.method !== "GET" && req.method !== "HEAD") return refuse(405, new EpError("method_not_allowed", `/metrics serves GET, not ${req.method}`), { allow: "GET, HEAD" });
    metrics.render().then(
      (text) => {
        res.writeHead(200, { "content-type": metrics.contentType });
        res.end(req.method === "HEAD" ? undefined : text);
      },
      (err: Error) => {
        log.error("metrics scrape failed", { error: err.message });
        refuse(500, new EpError("internal", "the metrics could not be collected; see the tower's log"));
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(listen.port, listen.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const addr = server.address() as { port: number };
  const host = listen.host.includes(":") ? `[${listen.host}]` : listen.host;
  return {
    url: `http://${host}:${addr.port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
