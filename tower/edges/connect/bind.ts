// A Connect service implementation (connect-es's ServiceImpl) over a domain object whose methods
// are named like the RPCs and take (caller, request, signal). The compiler checks the domain
// object against the service: a missing method, or one with the wrong request or response
// message, is a type error. The edge only finds the caller, calls and maps errors.
import type {
  DescMethodBiDiStreaming,
  DescMethodServerStreaming,
  DescMethodUnary,
  DescService,
  MessageInitShape,
  MessageShape,
} from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { EpError, toEpError } from "../../../common/errors.js";
import type { Logger } from "../../../common/log.js";
import type { Caller } from "../../domain/caller.js";
import { callerOf } from "../caller-key.js";

/**
 * The domain method behind one RPC (the tower serves unary, server-streaming and bidi RPCs; no client-streaming one).
 */
type DomainMethod<M> =
  M extends DescMethodUnary<infer I, infer O>
    ? (caller: Caller, req: MessageShape<I>, signal: AbortSignal) => Promise<MessageInitShape<O>>
    : M extends DescMethodServerStreaming<infer I, infer O>
      ? (caller: Caller, req: MessageShape<I>, signal: AbortSignal) => AsyncIterable<MessageInitShape<O>>
      : M extends DescMethodBiDiStreaming<infer I, infer O>
        ? (
            caller: Caller,
            reqs: AsyncIterable<MessageShape<I>>,
            signal: AbortSignal,
          ) => AsyncIterable<MessageInitShape<O>>
        : never;

/** What a domain object must have to serve `S`: one method per RPC, by connect-es's local name. */
export type DomainService<S extends DescService> = { [K in keyof S["method"]]: DomainMethod<S["method"][K]> };

/** The error in Connect's terms; an unexpected one (a bug, a dropped database) is logged with where it began. */
function asConnectError(err: unknown, method: string, log: Logger | undefined): Error {
  const ep = err instanceof EpError ? err : toEpError(err);
  if (ep.code === "internal") {
    const origin = ep.cause instanceof Error ? ep.cause : ep;
    log?.error("RPC failed", { method, error: origin.message, stack: origin.stack });
  }
  return ep.toConnectError();
}

type AnyMethod = (caller: Caller, req: unknown, signal: AbortSignal) => Promise<unknown> | AsyncIterable<unknown>;

/** `service` served by `domain`: each RPC calls the domain method of its name with the call's caller. */
export function serviceImpl<S extends DescService>(service: S, domain: DomainService<S>, log?: Logger): ServiceImpl<S> {
  const impl: Record<string, unknown> = {};
  for (const method of service.methods) {
    // DomainService<S> has every method of S, typed; one object of them, by name, here
    const fn = (domain as Record<string, AnyMethod>)[method.localName];
    const where = `${service.typeName}/${method.name}`;
    if (method.methodKind === "unary") {
      impl[method.localName] = async (req: unknown, ctx: HandlerContext) => {
        try {
          return await fn.call(domain, callerOf(ctx), req, ctx.signal);
        } catch (err) {
          throw asConnectError(err, where, log);
        }
      };
    } else {
      impl[method.localName] = async function* (req: unknown, ctx: HandlerContext) {
        try {
          yield* fn.call(domain, callerOf(ctx), req, ctx.signal) as AsyncIterable<unknown>;
        } catch (err) {
          throw asConnectError(err, where, log);
        }
      };
    }
  }
  return impl as ServiceImpl<S>;
}
