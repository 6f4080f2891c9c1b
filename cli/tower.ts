// The tower connection of the commands that need it: generated Connect clients over HTTP/1.1
// with the resolved bearer token.
import type { DescMessage, DescService, MessageShape } from "@bufbuild/protobuf";
import { restJson } from "../common/rest-json.js";
import { createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import type { Context } from "./context.js";

const transports = new WeakMap<Context, Transport>();

export function towerTransport(url: string, token: string | undefined): Transport {
  const auth: Interceptor = (next) => (req) => {
    if (token) req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
  return createConnectTransport({ baseUrl: url, httpVersion: "1.1", interceptors: [auth] });
}

export function tower<S extends DescService>(ctx: Context, service: S): Client<S> {
  let t = transports.get(ctx);
  if (!t) transports.set(ctx, (t = towerTransport(ctx.url(), ctx.token())));
  return createClient(service, t);
}

/** Proto JSON with the proto field names (snake_case, every field present) of a response message: what --json prints. */
export function protoJson<Desc extends DescMessage>(schema: Desc, msg: MessageShape<Desc>): Record<string, unknown> {
  return restJson(schema, msg);
}
