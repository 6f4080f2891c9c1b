// Connect unary calls served by Fastify routes of their own: POST, `application/proto` or
// `application/json`, an uncompressed body and no `connect-timeout-ms`. That is every call of epd
// and of the generated Connect clients in their defaults; everything else on the same paths (gRPC,
// gRPC-Web, GET, compressed requests, deadlines, streams) still goes to connect-es, chosen per
// request by a Fastify route constraint. The lane serves the same implementations: it replays the
// Connect registration (routes(router), as the daemon's JSON-RPC does) and calls each unary
// method with the request's caller in a context of its own.
//
// Why: connect-es's universal handler wraps each call in web Headers, URL parsing, async-iterable
// bodies and two abort controllers that it aborts after every call (each abort builds a
// DOMException with a stack). On this VM that was ~400 µs of tower CPU per unary call, four times
// what the same read costs over REST (docs/perf-history.md, "Lean Connect paths"). The lane decodes,
// calls the same domain method and encodes with the same protobuf-es functions, and answers errors
// with connect-es's own JSON error writer; tests/connect-lane.test.ts sends every case through both
// paths and compares the answers byte for byte.
import {
  create,
  fromBinary,
  fromJsonString,
  isMessage,
  toBinary,
  toJsonString,
  type DescMessage,
  type DescMethod,
  type DescService,
} from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type ConnectRouter, type HandlerContext } from "@connectrpc/connect";
import { codeToHttpStatus, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { IncomingMessage } from "node:http";
import { promisify } from "node:util";
import { gzip as gzipCb } from "node:zlib";
import { notBinaryMessage } from "../../../common/connect-errors.js";
import { EpError } from "../../../common/errors.js";
import { kCaller } from "../caller-key.js";

type UnaryCall = (req: unknown, ctx: HandlerContext) => unknown;

const gzip = promisify(gzipCb);
const STRATEGY = "connectUnary";
const UNARY_TYPE = /^application\/(proto|json)(?:;\s*charset=utf-?8)?$/i;
/** connect-es compresses a unary response from this size when the client accepts it; so does the lane (gzip) */
const COMPRESS_MIN_BYTES = 1024;

/** "proto" or "json" for a request the lane serves, undefined for one connect-es serves. */
export function laneOf(req: Pick<IncomingMessage, "method" | "headers">): "proto" | "json" | undefined {
  if (req.method !== "POST") return undefined;
  const h = req.headers;
  if (h["content-encoding"] !== undefined || h["connect-timeout-ms"] !== undefined) return undefined;
  const m = UNARY_TYPE.exec(h["content-type"] ?? "");
  return m ? (m[1].toLowerCase() as "proto" | "json") : undefined;
}

const strategy = {
  name: STRATEGY,
  storage() {
    const handlers = new Map<string, unknown>();
    return {
      get: (v: string) => handlers.get(v) ?? null,
      set: (v: string, store: unknown) => void handlers.set(v, store),
    };
  },
  deriveConstraint: (req: IncomingMessage) => laneOf(req),
  // a request the lane does not take falls through to the unconstrained route (connect-es)
  mustMatchWhenDerived: false,
};

/** The unary methods `routes` registers, each with its implementation (the Connect registration replayed). */
function unaryCalls(
  routes: (router: ConnectRouter) => void,
): { service: DescService; method: DescMethod; call: UnaryCall }[] {
  const calls: { service: DescService; method: DescMethod; call: UnaryCall }[] = [];
  const add = (method: DescMethod, fn: unknown, self?: object) => {
    if (method.methodKind === "unary" && typeof fn === "function")
      calls.push({ service: method.parent, method, call: fn.bind(self) as UnaryCall });
  };
  const router: ConnectRouter = {
    handlers: [],
    service(service, implementation) {
      for (const method of service.methods)
        add(method, (implementation as Record<string, unknown>)[method.localName], implementation);
      return router;
    },
    rpc(method, impl) {
      add(method, impl);
      return router;
    },
  };
  routes(router);
  return calls;
}

/** Registers the lane's routes for every unary method `routes` registers; call before connect-es's plugin. */
export async function registerUnaryLane(
  app: FastifyInstance,
  routes: (router: ConnectRouter) => void,
  bodyLimit: number,
): Promise<void> {
  if (!app.hasConstraintStrategy(STRATEGY)) app.addConstraintStrategy(strategy as never);
  const calls = unaryCalls(routes);
  await app.register(async (lane) => {
    // the body as bytes, whatever the type: decoding is the lane's (and its errors connect-es's)
    lane.removeAllContentTypeParsers();
    lane.addContentTypeParser("*", { parseAs: "buffer", bodyLimit }, (_req, body, done) => done(null, body));
    for (const { service, method, call } of calls) {
      for (const kind of ["proto", "json"] as const) {
        lane.route({
          method: "POST",
          url: `/${service.typeName}/${method.name}`,
          constraints: { [STRATEGY]: kind },
          handler: handlerFor(method, call, kind === "proto"),
        });
      }
    }
  });
}

/**
 * What a lane call gives the implementation: the request's caller (read by serviceImpl) and a
 * signal aborted when the client goes away; headers only when asked for. No deadline: a call
 * with `connect-timeout-ms` goes to connect-es.
 */
class LaneContext implements HandlerContext {
  readonly service: DescMethod["parent"];
  readonly requestMethod = "POST";
  readonly protocolName = "connect";
  readonly url: string;
  readonly values: HandlerContext["values"];
  #requestHeader: Headers | undefined;
  #responseHeader: Headers | undefined;
  #responseTrailer: Headers | undefined;

  // a class, not an object literal with getters: one is made per call
  constructor(
    readonly method: DescMethod,
    private readonly req: FastifyRequest,
    readonly signal: AbortSignal,
  ) {
    this.service = method.parent;
    this.url = req.url;
    this.values = createContextValues().set(kCaller, req.caller);
  }
  timeoutMs(): number | undefined {
    return undefined;
  }
  get requestHeader(): Headers {
    if (!this.#requestHeader) {
      this.#requestHeader = new Headers();
      for (const [k, v] of Object.entries(this.req.headers))
        if (v !== undefined) this.#requestHeader.set(k, Array.isArray(v) ? v.join(", ") : v);
    }
    return this.#requestHeader;
  }
  get responseHeader(): Headers {
    return (this.#responseHeader ??= new Headers());
  }
  get responseTrailer(): Headers {
    return (this.#responseTrailer ??= new Headers());
  }
}

function handlerFor(method: DescMethod, call: UnaryCall, binary: boolean) {
  const { input, output } = method;
  return async (req: FastifyRequest, reply: FastifyReply) => {
    const body = (req.body as Buffer | undefined) ?? Buffer.alloc(0);
    let bytes: Uint8Array;
    try {
      const msg = decode(input, input.typeName, body, binary);
      const ac = new AbortController();
      // the client went away before the answer: the call's signal says so (a waiting claim ends)
      const onClose = () =>
        void (reply.raw.writableFinished || ac.abort(new ConnectError("the client closed the call", Code.Canceled)));
      reply.raw.once("close", onClose);
      let out: unknown;
      try {
        out = await call(msg, new LaneContext(method, req, ac.signal));
      } finally {
        reply.raw.off("close", onClose);
      }
      const res = isMessage(out, output) ? out : create(output, out as never);
      bytes = binary ? toBinary(output, res) : Buffer.from(toJsonString(output, res));
    } catch (err) {
      const ce =
        err instanceof ConnectError
          ? err
          : err instanceof EpError
            ? err.toConnectError()
            : new ConnectError("internal error", Code.Internal, undefined, undefined, err);
      void reply.code(codeToHttpStatus(ce.code)).header("content-type", "application/json");
      ce.metadata.forEach((v, k) => void reply.header(k, v));
      return reply.send(Buffer.from(errorToJsonBytes(ce, {})));
    }
    void reply.header("content-type", binary ? "application/proto" : "application/json");
    if (bytes.byteLength >= COMPRESS_MIN_BYTES && /\bgzip\b/i.test(String(req.headers["accept-encoding"] ?? ""))) {
      bytes = await gzip(bytes);
      void reply.header("content-encoding", "gzip");
    }
    return reply.send(Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  };
}

/** The request message, or connect-es's refusal of it in EP's terms (tests/connect-lane.test.ts). */
function decode(input: DescMessage, name: string, body: Buffer, binary: boolean) {
  if (binary) {
    try {
      return fromBinary(input, body);
    } catch {
      throw notBinaryMessage(name);
    }
  }
  try {
    return fromJsonString(input, body.toString("utf8"), { ignoreUnknownFields: false });
  } catch (err) {
    throw new EpError("invalid_argument", ConnectError.from(err, Code.InvalidArgument).rawMessage);
  }
}
