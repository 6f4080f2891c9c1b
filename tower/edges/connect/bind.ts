// Binds a domain object (methods named like the RPCs, taking (caller, request)) to a
// Connect service implementation. The edge only decodes, calls and encodes.
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import { EpError, toEpError } from "../../../common/errors.js";
import type { Caller } from "../../domain/caller.js";
import { callerOf } from "../caller-key.js";

type Unary = (caller: Caller, req: unknown) => Promise<unknown>;
type ServerStream = (caller: Caller, req: unknown, signal: AbortSignal) => AsyncIterable<unknown>;

function asConnectError(err: unknown): Error {
  const ep = err instanceof EpError ? err : toEpError(err);
  return ep.toConnectError();
}

export function bindService(router: ConnectRouter, service: DescService, impl: object): void {
  const handlers: Record<string, unknown> = {};
  for (const method of service.methods as DescMethod[]) {
    const fn = (impl as Record<string, unknown>)[method.localName];
    if (typeof fn !== "function") continue;
    if (method.methodKind === "unary") {
      handlers[method.localName] = async (req: unknown, ctx: HandlerContext) => {
        try {
          return await (fn as Unary).call(impl, callerOf(ctx), req);
        } catch (err) {
          throw asConnectError(err);
        }
      };
    } else if (method.methodKind === "server_streaming") {
      handlers[method.localName] = async function* (req: unknown, ctx: HandlerContext) {
        try {
          yield* (fn as ServerStream).call(impl, callerOf(ctx), req, ctx.signal);
        } catch (err) {
          throw asConnectError(err);
        }
      };
    }
  }
  router.service(service, handlers as never);
}
