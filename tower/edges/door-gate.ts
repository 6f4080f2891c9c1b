// The role half of authorization (tower/domain/door-roles.ts), checked as soon as the caller is
// known and before any body is read or decoded: for a Connect, gRPC or gRPC-Web procedure by its
// path, for a REST route by the RPC whose request message it decodes into.
import type { DescMessage, DescService } from "@bufbuild/protobuf";
import type { FastifyRequest } from "fastify";
import type { Caller } from "../domain/caller.js";
import { authorizeRpc } from "../domain/door-roles.js";

export type DoorGate = (req: FastifyRequest, caller: Caller) => void;

/** The gate for `services` and the REST routes that decode into their request messages. */
export function createDoorGate(
  services: readonly DescService[],
  restRoutes: readonly { method: string; url: string; input: DescMessage }[],
): DoorGate {
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
  return (req, caller) => {
    const door =
      rpc.get(req.url.split("?", 1)[0]) ??
      (req.routeOptions.url ? rest.get(`${req.method} ${req.routeOptions.url}`) : undefined);
    if (door) authorizeRpc(caller, door);
  };
}
