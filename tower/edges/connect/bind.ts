// Binds a domain object (methods named like the RPCs, taking (caller, request)) to a
// Connect service implementation. The edge only decodes, calls and encodes.
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import { EpError, toEpError } from "../../../common/errors.js";
import type { Logger } from "../../../common/log.js";
import type { Caller } from "../../domain/caller.js";
import { callerOf } from "../caller-key.js";

type Unary = (caller: Caller, req: unknown, signal: AbortSignal) => Promise<unknown>;
type ServerStream = (caller: Caller, req: unknown, signal: AbortSignal) => AsyncIterable<unknown>;

/** The error in Connect's terms; an unexpected one (a bug, a dropped database) is logged with where it began. */
function asConnectError(err: unknown, method: string, log: Logger | undefined): Error {
  const ep = err instanceof EpError ? err : toEpError(err);
  if (ep.code === "internal") {
    const origin = ep.cause instanceof Error ? ep.cause : ep;
    log?.error("RPC failed", { method, error: origin.message, stack: origin.stack });
  }
  return ep.toConnectError();
}

export type UnaryCall = (caller: () => Caller, req: unknown, signal: AbortSignal) => Promise<unknown>;

/** The domain method behind a unary RPC, failing with a ConnectError; undefined when `impl` has none. */
export function unaryCall(service: DescService, method: DescMethod, impl: object, log?: Logger): UnaryCall | undefined {
  const fn = (impl as Record<string, unknown>)[method.localName];
  if (typeof fn !== "function" || method.methodKind !== "unary") return undefined;
  return async (caller, req, signal) => {
    try {
      return await (fn as Unary).call(impl, caller(), req, signal);
    } catch (err) {
      throw asConnectError(err, `${service.typeName}/${method.name}`, log);
    }
  };
}

export function bindService(router: ConnectRouter, service: DescService, impl: object, log?: Logger): void {
  const handlers: Record<string, unknown> = {};
  for (const method of service.methods as DescMethod[]) {
    const fn = (impl as Record<string, unknown>)[method.localName];
    if (typeof fn !== "function") continue;
    const unary = unaryCall(service, method, impl, log);
    if (unary) {
      handlers[method.localName] = (req: unknown, ctx: HandlerContext) => unary(() => callerOf(ctx), req, ctx.signal);
    } else if (method.methodKind === "server_streaming") {
      handlers[method.localName] = async function* (req: unknown, ctx: HandlerContext) {
        try {
          yield* (fn as ServerStream).call(impl, callerOf(ctx), req, ctx.signal);
        } catch (err) {
          throw asConnectError(err, `${service.typeName}/${method.name}`, log);
        }
      };
    }
  }
  router.service(service, handlers as never);
}
