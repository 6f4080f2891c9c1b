// A metrics-only address (EP_METRICS_LISTEN=host:port), the same for the tower and epd: plain
// HTTP, GET or HEAD /metrics and nothing else, no token. Whoever can reach the address reads the
// counts (no ids, names, prompts or output: docs/metrics.md), so the operator puts it on
// loopback or the monitoring network, apart from the public port.
import { createServer } from "node:http";
import { EpError } from "./errors.js";
import type { Logger } from "./log.js";

export interface MetricsSource {
  render(): Promise<string>;
  readonly contentType: string;
}

/** EP_METRICS_LISTEN parsed: host:port or [v6]:port; a bad value refused by name. */
export function metricsListenOf(raw: string | undefined): { host: string; port: number } | undefined {
  if (!raw) return undefined;
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(raw);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) {
    throw new EpError(
      "config_invalid",
      `EP_METRICS_LISTEN must be host:port with a port up to 65535 (got ${JSON.stringify(raw)}), e.g. 127.0.0.1:9464`,
      { field: "EP_METRICS_LISTEN" },
    );
  }
  return { host: m[1] ?? m[2], port };
}

/** Serves `metrics` on `listen` (port 0: any free one); resolves with its URL once it listens. */
export async function serveMetricsAddress(
  listen: { host: string; port: number },
  metrics: MetricsSource,
  log: Logger,
): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?", 1)[0];
    const refuse = (status: number, ep: EpError, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "content-type": "application/json", ...headers });
      res.end(JSON.stringify(ep.toJSON()));
    };
    if (path !== "/metrics")
      return refuse(404, new EpError("route_not_found", `the metrics address serves only GET /metrics (not ${path})`));
    if (req.method !== "GET" && req.method !== "HEAD")
      return refuse(405, new EpError("method_not_allowed", `/metrics serves GET, not ${req.method}`), {
        allow: "GET, HEAD",
      });
    metrics.render().then(
      (text) => {
        res.writeHead(200, { "content-type": metrics.contentType });
        res.end(req.method === "HEAD" ? undefined : text);
      },
      (err: Error) => {
        log.error("metrics scrape failed", { error: err.message });
        refuse(500, new EpError("internal", "the metrics could not be collected; see the log"));
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (err: NodeJS.ErrnoException) =>
      reject(
        err.code === "EADDRINUSE"
          ? new EpError(
              "config_invalid",
              `EP_METRICS_LISTEN ${listen.host}:${listen.port} is in use; pick another address`,
              { field: "EP_METRICS_LISTEN" },
            )
          : err,
      ),
    );
    server.listen(listen.port, listen.host, () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://${listen.host.includes(":") ? `[${listen.host}]` : listen.host}:${port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
