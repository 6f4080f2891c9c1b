// epd's unary calls to the tower: the Connect protocol's unary POST in binary protobuf, straight on
// node:http(s) with a keep-alive agent. connect-node's transport runs every unary call through its
// universal client (async iterables, linked abort controllers, envelope pipes), which cost this
// VM ~250–300 µs of client CPU and ~250 µs of wall time per call on top of the HTTP exchange
// itself (bench/rpc-call.ts; docs/perf-history.md, "epd's unary calls"): more than half of epd's CPU
// per short task. Server streams (the link) are read lean too (server-stream.ts); other stream kinds
// stay on connect-node's transport. Errors are connect's own (errorFromJsonBytes), so a refusal
// carries the tower's ErrorDetail exactly as connect-node's would.
import {
  create,
  fromBinary,
  isMessage,
  toBinary,
  type DescMessage,
  type DescMethodUnary,
  type MessageInitShape,
} from "@bufbuild/protobuf";
import { Code, ConnectError, type Transport, type UnaryResponse } from "@connectrpc/connect";
import { codeFromHttpStatus, errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import http from "node:http";
import https from "node:https";
import { callHeaders, serverStream } from "./server-stream.js";

export interface UnaryTransportOptions {
  baseUrl: string;
  /** headers every call carries (the node's bearer token) */
  headers: Record<string, string>;
  /** where streaming calls go */
  streams: Transport;
}

export function createUnaryTransport(opts: UnaryTransportOptions): Transport {
  const base = new URL(opts.baseUrl);
  const secure = base.protocol === "https:";
  const request = secure ? https.request : http.request;
  const agent = secure ? new https.Agent({ keepAlive: true }) : new http.Agent({ keepAlive: true });
  const prefix = base.pathname.replace(/\/+$/, "");
  // node:http takes an IPv6 literal without the URL's brackets
  const hostname = base.hostname.replace(/^\[(.*)\]$/, "$1");

  async function unary<I extends DescMessage, O extends DescMessage>(
    method: DescMethodUnary<I, O>,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    header: HeadersInit | undefined,
    input: MessageInitShape<I>,
  ): Promise<UnaryResponse<I, O>> {
    const message = isMessage(input, method.input) ? input : create(method.input, input);
    const body = toBinary(method.input, message);
    const headers = callHeaders(opts.headers, "application/proto", body.byteLength, header, timeoutMs);
    const path = `${prefix}/${method.parent.typeName}/${method.name}`;
    const { status, resHeaders, data } = await exchange(path, headers, body, signal, timeoutMs);
    const { header: h, trailer } = splitTrailers(resHeaders);
    if (status === 200 && /^application\/proto\b/.test(h.get("content-type") ?? "")) {
      return {
        stream: false,
        service: method.parent,
        method,
        header: h,
        message: fromBinary(method.output, data),
        trailer,
      };
    }
    const fallback = new ConnectError(`HTTP ${status}`, status === 200 ? Code.Internal : codeFromHttpStatus(status), h);
    throw /^application\/json\b/.test(h.get("content-type") ?? "") ? errorFromJsonBytes(data, h, fallback) : fallback;
  }

  function exchange(
    path: string,
    headers: Record<string, string | number>,
    body: Uint8Array,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    retried = false,
  ) {
    return new Promise<{ status: number; resHeaders: http.IncomingHttpHeaders; data: Uint8Array }>(
      (resolve, reject) => {
        if (signal?.aborted) return reject(new ConnectError("the call was cancelled", Code.Canceled));
        let timer: NodeJS.Timeout | undefined;
        const req = request(
          { protocol: base.protocol, hostname, port: base.port, path, method: "POST", agent, headers },
          (res) => {
            const chunks: Buffer[] = [];
            res.on("data", (c: Buffer) => chunks.push(c));
            res.on("end", () => {
              done();
              resolve({
                status: res.statusCode ?? 0,
                resHeaders: res.headers,
                data: chunks.length === 1 ? chunks[0] : Buffer.concat(chunks),
              });
            });
            res.on("error", fail);
          },
        );
        const onAbort = () => req.destroy(new ConnectError("the call was cancelled", Code.Canceled));
        const done = () => {
          if (timer) clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
        };
        function fail(err: Error & { code?: string }) {
          done();
          // a kept-alive connection the tower closed while idle, reset as this call was sent: the
          // tower never read it, so it goes once more on a new connection (Node's documented pattern)
          if (!retried && req.reusedSocket && err.code === "ECONNRESET")
            return resolve(exchange(path, headers, body, signal, timeoutMs, true));
          // a reset, refused or timed-out connection is the transport's failure, never the tower's answer
          reject(
            err instanceof ConnectError
              ? err
              : new ConnectError(`${path}: ${err.message}`, Code.Unavailable, undefined, undefined, err),
          );
        }
        req.on("error", fail);
        signal?.addEventListener("abort", onAbort, { once: true });
        if (timeoutMs !== undefined)
          timer = setTimeout(
            () => req.destroy(new ConnectError(`${path}: no answer in ${timeoutMs} ms`, Code.DeadlineExceeded)),
            timeoutMs,
          );
        req.end(body);
      },
    );
  }

  const target = { base, hostname, request, agent, headers: opts.headers };
  return {
    unary,
    // server streams (the link) read lean (server-stream.ts); any other kind goes to connect-node
    stream: (method, signal, timeoutMs, header, input, contextValues) =>
      method.methodKind === "server_streaming"
        ? serverStream(target, method, signal, timeoutMs, header, input)
        : opts.streams.stream(method, signal, timeoutMs, header, input, contextValues),
  };
}
/** Connect unary trailers travel as `trailer-` prefixed headers. */
function splitTrailers(raw: http.IncomingHttpHeaders): { header: Headers; trailer: Headers } {
  const header = new Headers();
  const trailer = new Headers();
  for (const [k, v] of Object.entries(raw)) {
    if (v === undefined) continue;
    const value = Array.isArray(v) ? v.join(", ") : v;
    if (k.startsWith("trailer-")) trailer.set(k.slice(8), value);
    else header.set(k, value);
  }
  return { header, trailer };
}
