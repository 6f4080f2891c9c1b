// HTTP and RPC requests by method, route template and status code, and their duration by route:
// the route is the pattern Fastify matched (`/work/tasks/:task_id/claim`, or the procedure path
// `/ep.tower.v1.WorkService/ClaimTask` for Connect, gRPC and gRPC-Web), never the raw URL, so
// the label set is bounded by the routes the tower serves. A request no route matched is
// "unmatched". Children are bound once per label set and reused: one map lookup per request.
import type { Registry } from "prom-client";
import { HotCounter, HotHistogram } from "../../common/hot-metrics.js";

const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);
export const UNMATCHED_ROUTE = "unmatched";
/** Request durations: the hot path's sub-millisecond calls to a long poll's 30 s. */
export const REQUEST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2, 10, 30];

export type HttpMeter = (method: string, route: string | undefined, status: number, seconds: number) => void;

export function createHttpMeter(registry: Registry): HttpMeter {
  const requests = new HotCounter({
    name: "ep_http_requests_total",
    help: "HTTP requests answered (REST, Connect, gRPC, gRPC-Web), by method, route template and status code.",
    labelNames: ["method", "route", "code"],
    registry,
  });
  const duration = new HotHistogram({
    name: "ep_http_request_duration_seconds",
    help: "Time from a request's arrival to its answer, by method and route template.",
    labelNames: ["method", "route"],
    buckets: REQUEST_BUCKETS,
    registry,
  });
  // route → method → status: strings Fastify keeps (their hashes cached) and a number, never a key built per request
  const byRoute = new Map<
    string,
    Map<string, Map<number, { count: ReturnType<HotCounter["child"]>; time: ReturnType<HotHistogram["child"]> }>>
  >();
  return (rawMethod, rawRoute, status, seconds) => {
    const route = rawRoute ?? UNMATCHED_ROUTE;
    let methods = byRoute.get(route);
    if (!methods) byRoute.set(route, (methods = new Map()));
    let codes = methods.get(rawMethod);
    if (!codes) methods.set(rawMethod, (codes = new Map()));
    let series = codes.get(status);
    if (!series) {
      const method = METHODS.has(rawMethod) ? rawMethod : "other";
      codes.set(
        status,
        (series = { count: requests.child(method, route, String(status)), time: duration.child(method, route) }),
      );
    }
    series.count.inc();
    series.time.observe(seconds);
  };
}
