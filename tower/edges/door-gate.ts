// The role half of authorization (tower/domain/door-roles.ts), checked as soon as the caller is
// known and before any body is read or decoded: for a Connect, gRPC or gRPC-Web procedure by its
// path, for a REST route by the RPC whose request message it decodes into. Each route's door is
// found once, as the route is registered, and checked by a hook of that route that runs after the
// app's own onRequest hooks (authentication): no lookup by URL per request.
import type { DescMessage, DescService } from "@bufbuild/protobuf";
import type { FastifyInstance, onRequestHookHandler } from "fastify";
import type { Caller } from "../domain/caller.js";
import { authorizeRpc } from "../domain/door-roles.js";

/**
 * Gates every route registered on `app` from now on that is a procedure of `services` or one of `restRoutes` (a
 * request with no caller is a public path's: authentication decided it).
 */
export function gateDoors(
  app: FastifyInstance,
  services: readonly DescService[],
  restRoutes: readonly { method: string; url: string; input: DescMessage }[],
): void {
  // the procedure path (/ep.tower.v1.WorkService/CreateTask) and the request message, each to its door
  const rpc = new Map<string, string>();
  const byInput = new Map<string, string>();
  for (const s of services) {
    for (const m of s.methods) {
      rpc.set(`/${s.typeName}/${m.name}`, `${s.name}/${m.name}`);
      byInput.set(m.input.typeName, `${s.name}/${m.name}`);
    }
  }
  const rest = new Map<string, string>();
  for (const r of restRoutes) {
    const door = byInput.get(r.input.typeName);
    if (door) rest.set(`${r.method} ${r.url}`, door);
  }
  app.addHook("onRoute", (route) => {
    // a procedure whatever the method (Connect serves GET too); a REST route by its method and
    // pattern (the HEAD route fastify adds beside a GET is not one)
    const door =
      rpc.get(route.url) ?? (typeof route.method === "string" ? rest.get(`${route.method} ${route.url}`) : undefined);
    if (!door) return;
    const gate: onRequestHookHandler = (req, _reply, done) => {
      if (req.caller) authorizeRpc(req.caller as Caller, door);
      done();
    };
    route.onRequest = [...[route.onRequest ?? []].flat(), gate];
  });
}
