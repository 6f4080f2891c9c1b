// An EP error in the caller's RPC protocol, written the same way wherever it is raised: in a
// handler (connect-es writes it), before one (credentials, body limits, unknown methods: the
// tower's error handler), or by connect-es itself (mended here). Every shape carries the status
// code of the error's class and EP's typed ErrorDetail (ep.errors.v1):
//   gRPC / gRPC-Web   trailers-only: grpc-status, grpc-message, grpc-status-details-bin
//   Connect unary     the class's HTTP status and the Connect JSON error with "details"
//   Connect streaming HTTP 200 and an end-of-stream message holding the error
import type { UniversalHandler, UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";
import {
  codeToHttpStatus,
  endStreamFlag,
  endStreamToJson,
  errorToJsonBytes,
} from "@connectrpc/connect/protocol-connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { EpError } from "./errors.js";

export interface RpcErrorResponse {
  status: number;
  header: Headers;
  body: Uint8Array;
}

/** The error as the response a client of `contentType` (the request's) expects. */
export function rpcErrorResponse(contentType: string, ep: EpError): RpcErrorResponse {
  const ce = ep.toConnectError();
  const type = contentType.toLowerCase();
  if (type.startsWith("application/grpc")) {
    const web = type.startsWith("application/grpc-web");
    const header = new Headers({
      "content-type": web
        ? type.includes("text")
          ? "application/grpc-web-text+proto"
          : "application/grpc-web+proto"
        : type.split(";")[0],
    });
    setTrailerStatus(header, ce);
    return { status: 200, header, body: new Uint8Array(0) };
  }
  if (type.startsWith("application/connect+")) {
    const json = new TextEncoder().encode(JSON.stringify(endStreamToJson(new Headers(), ce, undefined)));
    const body = new Uint8Array(5 + json.length);
    body[0] = endStreamFlag;
    new DataView(body.buffer).setUint32(1, json.length);
    body.set(json, 5);
    return { status: 200, header: new Headers({ "content-type": type.split(";")[0] }), body };
  }
  return {
    status: codeToHttpStatus(ce.code),
    header: new Headers({ "content-type": "application/json" }),
    body: errorToJsonBytes(ce, {}),
  };
}

/** A request body that does not decode as the method's binary message (the lane and connect-es say the same). */
export const notBinaryMessage = (typeName: string): EpError =>
  new EpError("invalid_argument", `the request body is not a valid binary ${typeName} message`);

/** A request message flagged compressed while the request names no encoding to read it with. */
export const compressedWithoutEncoding = (): EpError =>
  new EpError(
    "invalid_argument",
    "a message is flagged compressed but the request names no encoding (grpc-encoding, " +
      "connect-content-encoding); send it uncompressed or name its encoding (gzip, br)",
  );

/**
 * Errors connect-es raises itself, before EP's code runs, in EP's terms: a body that is not a
 * valid binary message is `invalid_argument` (connect-es says `internal` and quotes the parser), one
 * that is not a valid JSON message is too (with EP's detail, which connect-es leaves out), and so
 * is a message flagged compressed without an encoding (connect-es says `internal`); a message
 * over the size limit is `payload_too_large`.
 */
function mend(code: string, message: string, h: UniversalHandler, bodyLimit: number): EpError | undefined {
  if (code === "internal" && message.startsWith("parse binary")) return notBinaryMessage(h.method.input.typeName);
  // a JSON body protobuf-es cannot read (bad JSON, an unknown field): connect-es sends it without EP's detail
  if (code === "invalid_argument" && message.startsWith("cannot decode "))
    return new EpError("invalid_argument", message);
  if (code === "resource_exhausted" && /readMaxBytes|message size|larger than/i.test(message))
    return new EpError("payload_too_large", `the body is larger than ${bodyLimit} bytes`);
  // a message flagged compressed in a request that names no encoding: the caller's mistake, not a fault here
  if (code === "internal" && message.startsWith("received compressed envelope")) return compressedWithoutEncoding();
  return undefined;
}

async function readAll(body: AsyncIterable<Uint8Array> | undefined): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  if (body) for await (const p of body) parts.push(p);
  return Buffer.concat(parts);
}

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

const GRPC_CODE_NAMES: Record<string, string> = { "8": "resource_exhausted", "13": "internal" };

/** The failure in a gRPC-Web trailer frame's text (its header lines), when mend() knows it. */
function mendTrailerText(text: string, h: UniversalHandler, bodyLimit: number): EpError | undefined {
  const status = /grpc-status:\s*(\d+)/i.exec(text)?.[1];
  if (!status || !GRPC_CODE_NAMES[status]) return undefined;
  return mend(
    GRPC_CODE_NAMES[status],
    decodeURIComponent(/grpc-message:\s*([^\r\n]*)/i.exec(text)?.[1] ?? ""),
    h,
    bodyLimit,
  );
}

/** What connect-es answered, when it is one of the failures mend() knows. */
async function failureOf(
  res: UniversalServerResponse,
  h: UniversalHandler,
  bodyLimit: number,
): Promise<{ ep?: EpError; body?: Buffer }> {
  for (const headers of [res.header, res.trailer]) {
    const status = headers?.get("grpc-status");
    if (status && GRPC_CODE_NAMES[status])
      return {
        ep: mend(GRPC_CODE_NAMES[status], decodeURIComponent(headers?.get("grpc-message") ?? ""), h, bodyLimit),
      };
  }
  const type = res.header?.get("content-type") ?? "";
  if (type.startsWith("application/grpc-web") && h.method.methodKind === "unary") {
    // gRPC-Web sends the status in a trailer frame at the end of the body (flag 0x80, then
    // header lines); a unary response is short and complete, so it is read whole
    const body = await readAll(res.body);
    return { ep: mendTrailerText(body.toString("latin1"), h, bodyLimit), body };
  }
  if (res.status < 400 || !type.startsWith("application/json")) return {};
  const body = await readAll(res.body);
  try {
    const err = JSON.parse(body.toString("utf8")) as { code?: unknown; message?: unknown };
    if (typeof err.code === "string") return { ep: mend(err.code, String(err.message ?? ""), h, bodyLimit), body };
  } catch {
    // not a Connect error body: as it was
  }
  return { body };
}

/** The failure in a Connect end-stream message's JSON, when mend() knows it. */
function mendEndStream(json: string, h: UniversalHandler, bodyLimit: number): EpError | undefined {
  try {
    const { error } = JSON.parse(json) as { error?: { code?: unknown; message?: unknown } };
    return typeof error?.code === "string" ? mend(error.code, String(error.message ?? ""), h, bodyLimit) : undefined;
  } catch {
    return undefined; // not an end-stream message connect-es wrote: as it was
  }
}

/**
 * A streaming gRPC-Web or Connect response refused before its first message is one frame (a
 * gRPC-Web trailer frame, flag 0x80; a Connect end-stream message, flag 0x02): mended when it is
 * a failure mend() knows. Every later chunk is the body's own, read straight from it: a node's
 * link is one long stream, and a generator step per message cost ~10 µs of the tower's CPU per
 * task handed over (docs/perf-history.md, "Delivery cost").
 */
function mendStreamStart(
  req: UniversalServerRequest,
  body: AsyncIterable<Uint8Array>,
  h: UniversalHandler,
  bodyLimit: number,
): AsyncIterable<Uint8Array> {
  const type = req.header.get("content-type") ?? "";
  const web = type.startsWith("application/grpc-web");
  const mendFirst = (chunk: Uint8Array): Uint8Array => {
    if (chunk[0] !== (web ? 0x80 : endStreamFlag)) return chunk;
    const text = Buffer.from(chunk.subarray(5)).toString(web ? "latin1" : "utf8");
    const ep = web ? mendTrailerText(text, h, bodyLimit) : mendEndStream(text, h, bodyLimit);
    if (!ep) return chunk;
    const e = rpcErrorResponse(type, ep);
    return web ? trailerFrame(e.header) : e.body;
  };
  return {
    [Symbol.asyncIterator]() {
      const it = body[Symbol.asyncIterator]();
      const rest = {
        next: () => it.next(),
        return: (value?: unknown) => it.return?.(value) ?? Promise.resolve({ done: true as const, value: undefined }),
        throw: (err?: unknown) => it.throw?.(err) ?? Promise.reject(err),
      };
      return {
        ...rest,
        async next() {
          const r = await it.next();
          this.next = rest.next; // from the second chunk on, the body's own iterator
          return r.done ? r : { done: false, value: mendFirst(r.value) };
        },
      };
    },
  };
}

/** A gRPC-Web trailer frame holding the fields. */
function trailerFrame(fields: Headers): Uint8Array {
  let lines = "";
  fields.forEach((v, k) => {
    if (k !== "content-type") lines += `${k}: ${v}\r\n`;
  });
  const text = Buffer.from(lines, "latin1");
  const frame = Buffer.alloc(5 + text.length);
  frame[0] = 0x80;
  frame.writeUInt32BE(text.length, 1);
  text.copy(frame, 5);
  return frame;
}

async function mendResponse(
  req: UniversalServerRequest,
  res: UniversalServerResponse,
  h: UniversalHandler,
  bodyLimit: number,
): Promise<UniversalServerResponse> {
  const type = res.header?.get("content-type") ?? "";
  const streamed = type.startsWith("application/grpc-web") || type.startsWith("application/connect+");
  if (streamed && h.method.methodKind !== "unary" && res.body && !res.header?.has("grpc-status")) {
    return { ...res, body: mendStreamStart(req, res.body, h, bodyLimit) };
  }
  const { ep, body } = await failureOf(res, h, bodyLimit);
  if (ep) {
    const e = rpcErrorResponse(req.header.get("content-type") ?? "", ep);
    return { status: e.status, header: e.header, body: once(e.body) };
  }
  return body ? { ...res, body: once(body) } : res;
}

/** Wraps every handler of a Connect router (in place) so Connect's own failures leave in EP's terms. */
export function mendProtocolErrors(handlers: UniversalHandler[], bodyLimit: number): void {
  for (let i = 0; i < handlers.length; i++) {
    const h = handlers[i];
    const wrapped = Object.assign(
      async (req: UniversalServerRequest) => mendResponse(req, await h(req), h, bodyLimit),
      h,
    );
    handlers[i] = wrapped;
  }
}
