// How an authenticated caller travels from the HTTP layer to the handlers.
import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import type {} from "fastify";
import { EpError } from "../../common/errors.js";
import type { Caller } from "../domain/caller.js";

export const kCaller = createContextKey<Caller | undefined>(undefined, { description: "authenticated caller" });

export function callerOf(ctx: HandlerContext): Caller {
  const c = ctx.values.get(kCaller);
  if (!c) throw new EpError("unauthenticated");
  return c;
}

declare module "fastify" {
  interface FastifyRequest {
    caller?: Caller;
  }
}
