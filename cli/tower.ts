// The tower connection of the commands that need it: generated Connect clients over HTTP/1.1
// with the resolved bearer token.
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { DescMessage, DescService, MessageShape } from "@bufbuild/protobuf";
import { backoffDelay } from "../common/backoff.js";
import { restJson } from "../common/rest-json.js";
import { Code, ConnectError, createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import type { Context } from "./context.js";

/** Attempts of a create that got no answer (the first and the retries). */
export const CREATE_ATTEMPTS = 4;

/**
 * Creates (requests with a request_id field) carry a fresh idempotency key; one that got no
 * answer — UNAVAILABLE: a proxy's 502/503/504, a dropped connection — is sent again with the same
 * key after 1 s, 2 s, 4 s, so the tower makes it once and answers every attempt alike.
 */
export const idempotentCreates: Interceptor = (next) => async (req) => {
  if (req.stream || !("requestId" in req.message)) return next(req);
  const message = req.message as { requestId: string };
  if (!message.requestId) message.requestId = randomUUID();
  for (let attempt = 1; ; attempt++) {
    try {
      return await next(req);
    } catch (err) {
      if (ConnectError.from(err).code !== Code.Unavailable || attempt >= CREATE_ATTEMPTS || req.signal.aborted)
        throw err;
      await sleep(backoffDelay(attempt - 1));
    }
  }
};

const transports = new WeakMap<Context, Transport>();

export function towerTransport(url: string, token: string | undefined): Transport {
  const auth: Interceptor = (next) => (req) => {
    if (token) req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
  return createConnectTransport({ baseUrl: url, httpVersion: "1.1", interceptors: [idempotentCreates, auth] });
}

export function tower<S extends DescService>(ctx: Context, service: S): Client<S> {
  let t = transports.get(ctx);
  if (!t) transports.set(ctx, (t = towerTransport(ctx.url(), ctx.token())));
  return createClient(service, t);
}

/**
 * Proto JSON with the proto field names (snake_case, every field present) of a response message: what --json prints.
 */
export function protoJson<Desc extends DescMessage>(schema: Desc, msg: MessageShape<Desc>): Record<string, unknown> {
  return restJson(schema, msg);
}
