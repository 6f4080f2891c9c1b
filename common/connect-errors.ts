// Errors Connect raises itself, before a request reaches EP's code, put in EP's terms: a body
// that is not valid binary protobuf is `invalid_argument` (connect-es says `internal` and quotes
// the parser), and a message over the size limit carries EP's `payload_too_large`. The answer
// stays in the caller's protocol (Connect JSON error, or gRPC / gRPC-Web status headers).
import type { UniversalHandler, UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { Code } from "@connectrpc/connect";

interface Mended {
  connectCode: Code;
  codeName: string;
  httpStatus: number;
  epCode: string;
  message: string;
}

function mend(code: string, message: string, h: UniversalHandler, bodyLimit: number): Mended | undefined {
  if (code === "internal" && message.startsWith("parse binary")) {
    return { connectCode: Code.InvalidArgument, codeName: "invalid_argument", httpStatus: 400, epCode: "invalid_argument", message: `the request body is not a valid binary ${h.method.input.typeName} message` };
  }
  if (code === "resource_exhausted" && /readMaxBytes|message size|larger than/i.test(message)) {
    return { connectCode: Code.ResourceExhausted, codeName: "resource_exhausted", httpStatus: 429, epCode: "payload_too_large", message: `the body is larger than ${bodyLimit} bytes` };
  }
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

/** Mends gRPC(-Web) status headers or trailers in place; true when it changed something. */
function mendGrpc(headers: Headers | undefined, h: UniversalHandler, bodyLimit: number): boolean {
  const status = headers?.get("grpc-status");
  if (!headers || !status || !GRPC_CODE_NAMES[status]) return false;
  const m = mend(GRPC_CODE_NAMES[status], decodeURIComponent(headers.get("grpc-message") ?? ""), h, bodyLimit);
  if (!m) return false;
  headers.set("grpc-status", String(m.connectCode));
  headers.set("grpc-message", encodeURIComponent(m.message));
  headers.set("ep-error-code", m.epCode);
  return true;
}

/**
 * gRPC-Web sends the status in a trailer frame at the end of the body (flag 0x80, then HTTP
 * header lines). Unary responses are short and complete, so the frame is mended in the bytes.
 */
async function mendGrpcWebBody(res: UniversalServerResponse, h: UniversalHandler, bodyLimit: number): Promise<UniversalServerResponse> {
  const bytes = await readAll(res.body);
  let at = 0;
  while (at + 5 <= bytes.length) {
    const flags = bytes[at];
    const len = bytes.readUInt32BE(at + 1);
    if (flags & 0x80) {
      const headers = new Headers();
      for (const line of bytes.subarray(at + 5, at + 5 + len).toString("utf8").split("\r\n")) {
        const i = line.indexOf(":");
        if (i > 0) headers.set(line.slice(0, i).trim(), line.slice(i + 1).trim());
      }
      if (!mendGrpc(headers, h, bodyLimit)) break;
      let lines = "";
      headers.forEach((v, k) => (lines += `${k}: ${v}\r\n`));
      const text = Buffer.from(lines);
      const frame = Buffer.alloc(5);
      frame[0] = flags;
      frame.writeUInt32BE(text.length, 1);
      return { ...res, body: once(Buffer.concat([bytes.subarray(0, at), frame, text])) };
    }
    at += 5 + len;
  }
  return { ...res, body: once(bytes) };
}

async function mendResponse(res: UniversalServerResponse, h: UniversalHandler, bodyLimit: number): Promise<UniversalServerResponse> {
  if (mendGrpc(res.header, h, bodyLimit) || mendGrpc(res.trailer, h, bodyLimit)) return res;
  const type = res.header?.get("content-type") ?? "";
  if (type.startsWith("application/grpc-web") && h.method.methodKind === "unary") return mendGrpcWebBody(res, h, bodyLimit);
  if (res.status < 400 || !type.startsWith("application/json") || res.header?.has("ep-error-code")) return res;
  const bytes = await readAll(res.body);
  let err: { code?: unknown; message?: unknown } | undefined;
  try {
    err = JSON.parse(bytes.toString("utf8"));
  } catch {
    // not a Connect error body: as it was
  }
  const m = err && typeof err.code === "string" ? mend(err.code, String(err.message ?? ""), h, bodyLimit) : undefined;
  if (!m) return { ...res, body: once(bytes) };
  const body = Buffer.from(JSON.stringify({ code: m.codeName, message: m.message }));
  const header = new Headers(res.header);
  header.set("content-length", String(body.length));
  header.set("ep-error-code", m.epCode);
  return { ...res, status: m.httpStatus, header, body: once(body) };
}

/** Wraps every handler of a Connect router (in place) so Connect's own failures leave in EP's terms. */
export function mendProtocolErrors(handlers: UniversalHandler[], bodyLimit: number): void {
  for (let i = 0; i < handlers.length; i++) {
    const h = handlers[i];
    const wrapped = Object.assign(async (req: UniversalServerRequest) => mendResponse(await h(req), h, bodyLimit), h);
    handlers[i] = wrapped;
  }
}
