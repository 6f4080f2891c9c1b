// JSON-RPC 2.0, one message per line, over the same service implementations that
// Connect serves. The routes function that registers services on a ConnectRouter
// is run once more against a recording router, so both protocols share one
// registration and one implementation.
import type { DescMessage, DescMethod, DescMethodUnary, DescService, JsonValue } from "@bufbuild/protobuf";
import { create, fromJson, isMessage, toJson } from "@bufbuild/protobuf";
import type { ConnectRouter, HandlerContext, MethodImpl, ServiceImpl } from "@connectrpc/connect";
import { createHandlerContext } from "@connectrpc/connect";
import { EpError, invalidField, toEpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import { silentLogger } from "../../common/log.js";
import type { LineHandler } from "./socket-server.js";

export type JsonRpcHandler = LineHandler & {
  /** Every JSON-RPC method name served, sorted. */
  readonly methods: readonly string[];
};

/** The standard JSON-RPC 2.0 error codes; EpErrors use their catalog's jsonRpcCode. */
export const JSON_RPC_ERRORS = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603,
} as const;

type JsonRpcId = string | number | null;

export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data: { code: string; details: Record<string, unknown> };
}

export type JsonRpcResponse =
  | { jsonrpc: "2.0"; id: JsonRpcId; result: JsonValue }
  | { jsonrpc: "2.0"; id: JsonRpcId; error: JsonRpcErrorObject };

/** `DaemonService.Status` → `daemon.status`, `CronService.GcNow` → `cron.gcNow`. */
export function jsonRpcMethodName(service: DescService, method: DescMethod): string {
  const base = service.name.replace(/Service$/, "");
  return `${base.charAt(0).toLowerCase()}${base.slice(1)}.${method.localName}`;
}

type UnaryFn = (request: unknown, context: HandlerContext) => unknown;

interface RegisteredMethod {
  service: DescService;
  method: DescMethodUnary;
  impl: UnaryFn;
}

/** Runs `routes` against a router that records the unary methods it is given. */
export function collectJsonRpcMethods(routes: (router: ConnectRouter) => void): Map<string, RegisteredMethod> {
  const methods = new Map<string, RegisteredMethod>();
  const add = (method: DescMethod, fn: unknown) => {
    // Streaming methods have no one-line answer; Connect still serves them.
    if (method.methodKind !== "unary" || typeof fn !== "function") return;
    methods.set(jsonRpcMethodName(method.parent, method), {
      service: method.parent,
      method: method as DescMethodUnary,
      impl: fn as UnaryFn,
    });
  };
  const router: ConnectRouter = {
    handlers: [],
    service<T extends DescService>(service: T, implementation: Partial<ServiceImpl<T>>) {
      const impl = implementation as Record<string, unknown>;
      for (const method of service.methods) {
        const fn = impl[method.localName];
        if (typeof fn === "function") add(method, fn.bind(implementation));
      }
      return router;
    },
    rpc<M extends DescMethod>(method: M, impl: MethodImpl<M>) {
      add(method, impl);
      return router;
    },
  };
  routes(router);
  return methods;
}

export interface JsonRpcHandlerOptions {
  /** The same function given to serveUnixSocket (and to any Connect adapter). */
  routes: (router: ConnectRouter) => void;
  log?: Logger;
  /** Largest batch accepted; 100 unless told. */
  maxBatch?: number;
}

export function createJsonRpcHandler(opts: JsonRpcHandlerOptions): JsonRpcHandler {
  const log = opts.log ?? silentLogger;
  const maxBatch = opts.maxBatch ?? 100;
  const methods = collectJsonRpcMethods(opts.routes);

  async function call(request: unknown): Promise<JsonRpcResponse | undefined> {
    const checked = checkRequest(request);
    if ("error" in checked) return checked.error;
    const { id, isNotification, method: name, params } = checked;
    const reply = (outcome: { result: JsonValue } | { error: JsonRpcErrorObject }): JsonRpcResponse | undefined =>
      isNotification ? undefined : { jsonrpc: "2.0", id, ...outcome };

    const registered = methods.get(name);
    if (!registered) {
      return reply({
        error: {
          code: JSON_RPC_ERRORS.methodNotFound,
          message: `method "${name}" not found; methods: ${[...methods.keys()].sort().join(", ")}`,
          data: { code: "route_not_found", details: { method: name } },
        },
      });
    }
    const { service, method, impl } = registered;
    const context = createHandlerContext({
      service,
      method,
      protocolName: "jsonrpc",
      requestMethod: "POST",
      url: `jsonrpc:${name}`,
    });
    try {
      const input = decodeParams(method.input, params);
      const output = await impl(input, context);
      const message = isMessage(output, method.output) ? output : create(method.output, output as never);
      return reply({ result: toJson(method.output, message, { alwaysEmitImplicit: true }) });
    } catch (err) {
      if (!(err instanceof EpError)) log.error("JSON-RPC method failed", { method: name, error: errorText(err) });
      return reply({ error: errorObject(err) });
    } finally {
      context.abort();
    }
  }

  return {
    methods: [...methods.keys()].sort(),
    async handleLine(line) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch (err) {
        return JSON.stringify(
          failure(null, JSON_RPC_ERRORS.parseError, `parse error: ${errorText(err)}`, "invalid_json", {}),
        );
      }
      if (!Array.isArray(parsed)) {
        const response = await call(parsed);
        return response && JSON.stringify(response);
      }
      if (parsed.length === 0 || parsed.length > maxBatch) {
        const why = parsed.length === 0 ? "a batch must not be empty" : `a batch holds at most ${maxBatch} requests`;
        return JSON.stringify(failure(null, JSON_RPC_ERRORS.invalidRequest, why, "invalid_argument", {}));
      }
      const responses: JsonRpcResponse[] = [];
      for (const request of parsed) {
        const response = await call(request);
        if (response) responses.push(response);
      }
      return responses.length ? JSON.stringify(responses) : undefined;
    },
    lineTooLong(maxLineBytes) {
      const err = new EpError(
        "payload_too_large",
        `a line is limited to ${maxLineBytes} bytes; closing the connection`,
        {
          limit: maxLineBytes,
        },
      );
      return JSON.stringify({ jsonrpc: "2.0", id: null, error: errorObject(err) });
    },
  };
}

const REQUEST_MEMBERS = new Set(["jsonrpc", "id", "method", "params"]);

type CheckedRequest =
  | { id: JsonRpcId; isNotification: boolean; method: string; params: unknown }
  | { error: JsonRpcResponse };

function checkRequest(request: unknown): CheckedRequest {
  const invalid = (id: JsonRpcId, field: string, why: string): CheckedRequest => ({
    error: failure(id, JSON_RPC_ERRORS.invalidRequest, `invalid request: ${field}: ${why}`, "invalid_argument", {
      field,
    }),
  });
  if (typeof request !== "object" || request === null || Array.isArray(request)) {
    return invalid(null, "request", "must be a JSON object");
  }
  const r = request as Record<string, unknown>;
  const isNotification = !Object.hasOwn(r, "id");
  const validId = r.id === undefined || r.id === null || typeof r.id === "string" || typeof r.id === "number";
  if (!validId) return invalid(null, "id", "must be a string, a number or null");
  const id = (r.id ?? null) as JsonRpcId;
  if (r.jsonrpc !== "2.0") return invalid(id, "jsonrpc", 'must be "2.0"');
  if (typeof r.method !== "string" || r.method === "") return invalid(id, "method", "must be a non-empty string");
  const extra = Object.keys(r).find((k) => !REQUEST_MEMBERS.has(k));
  if (extra !== undefined) return invalid(id, extra, "unknown member of a JSON-RPC request");
  return { id, isNotification, method: r.method, params: r.params };
}

/** Decodes params as the proto JSON of the request; the error names the field at fault. */
function decodeParams(schema: DescMessage, params: unknown): unknown {
  if (params === undefined || params === null) params = {};
  if (typeof params !== "object" || Array.isArray(params)) {
    throw invalidField(
      "params",
      `must be a JSON object with the fields of ${schema.typeName} (positional params are not supported)`,
    );
  }
  try {
    return fromJson(schema, params as JsonValue, { ignoreUnknownFields: false });
  } catch (err) {
    throw paramsError(schema, params as Record<string, JsonValue>, err);
  }
}

function paramsError(schema: DescMessage, params: Record<string, JsonValue>, err: unknown): EpError {
  // fromJson's messages name a field only for some failures; try each key alone to find the culprit.
  for (const [key, value] of Object.entries(params)) {
    const field = schema.fields.find((f) => f.jsonName === key || f.name === key);
    if (!field) {
      const known = schema.fields.map((f) => f.jsonName).join(", ") || "none";
      return new EpError("unknown_field", `${key}: unknown field of ${schema.typeName} (fields: ${known})`, {
        field: key,
      });
    }
    try {
      fromJson(schema, { [key]: value }, { ignoreUnknownFields: false });
    } catch (keyErr) {
      return invalidField(fieldPath(schema, key, keyErr), reason(keyErr));
    }
  }
  return invalidField("params", reason(err));
}

function fieldPath(schema: DescMessage, key: string, err: unknown): string {
  const cause =
    err instanceof Error
      ? (err.cause as { field?: () => { parent?: unknown; name: string; jsonName?: string } })
      : undefined;
  const inner = typeof cause?.field === "function" ? cause.field() : undefined;
  if (!inner || inner.parent === schema) return key;
  return `${key}.${inner.jsonName ?? inner.name}`;
}

function reason(err: unknown): string {
  return errorText(err).replace(/^cannot decode .*? from JSON:? /, "");
}

function errorObject(err: unknown): JsonRpcErrorObject {
  const ep = err instanceof EpError ? err : toEpErrorSafely(err);
  return { code: ep.jsonRpcCode, message: ep.message, data: { code: ep.code, details: ep.details ?? {} } };
}

/** A ConnectError keeps its meaning; anything else is an internal error whose text stays in the log. */
function toEpErrorSafely(err: unknown): EpError {
  const ep = toEpError(err);
  return ep.code === "internal" ? new EpError("internal", "internal error; see the epd log") : ep;
}

function failure(
  id: JsonRpcId,
  code: number,
  message: string,
  epCode: string,
  details: Record<string, unknown>,
): JsonRpcResponse {
  return { jsonrpc: "2.0", id, error: { code, message, data: { code: epCode, details } } };
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
