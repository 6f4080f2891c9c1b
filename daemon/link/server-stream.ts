// epd's server-streaming calls (the node link: NodeService.Link) in the Connect protocol, binary
// protobuf, straight on node:http(s): one enveloped request, then envelopes read off the response
// as they arrive until the end-stream envelope. connect-node's transport passes every message
// through a chain of async iterables; at the link's pace (a message per task, each waking epd)
// that cost ~150 µs of CPU per message on this VM against ~0 here (docs/perf-history.md, "Pushed
// work"). Errors are connect's own (errorFromJsonBytes, endStreamFromJson), as in unary-transport.ts.
import {
  create,
  fromBinary,
  isMessage,
  toBinary,
  type DescMessage,
  type DescMethodStreaming,
  type MessageShape,
} from "@bufbuild/protobuf";
import { Code, ConnectError, type StreamResponse } from "@connectrpc/connect";
import { codeFromHttpStatus, endStreamFromJson, errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import type http from "node:http";

/** Flags of a Connect envelope. */
const COMPRESSED = 0b01;
const END_STREAM = 0b10;

export interface ServerStreamTarget {
  base: URL;
  hostname: string;
  request: typeof http.request;
  agent: http.Agent;
  headers: Record<string, string>;
}

/** One server-streaming call; resolves once the tower answered with its headers (or refused). */
export async function serverStream<I extends DescMessage, O extends DescMessage>(
  to: ServerStreamTarget,
  method: DescMethodStreaming<I, O>,
  signal: AbortSignal | undefined,
  timeoutMs: number | undefined,
  header: HeadersInit | undefined,
  input: AsyncIterable<unknown>,
): Promise<StreamResponse<I, O>> {
  let first: unknown;
  for await (const m of input) {
    first = m;
    break;
  }
  const message = isMessage(first, method.input) ? first : create(method.input, (first ?? {}) as never);
  const payload = toBinary(method.input, message);
  const body = Buffer.alloc(5 + payload.byteLength);
  body.writeUInt32BE(payload.byteLength, 1);
  body.set(payload, 5);
  const headers = callHeaders(to.headers, "application/connect+proto", body.byteLength, header, timeoutMs);
  const path = `${to.base.pathname.replace(/\/+$/, "")}/${method.parent.typeName}/${method.name}`;
  if (signal?.aborted) throw new ConnectError("the call was cancelled", Code.Canceled);

  const reader = new EnvelopeReader<MessageShape<O>>((bytes) => fromBinary(method.output, bytes));
  const req = to.request({
    protocol: to.base.protocol,
    hostname: to.hostname,
    port: to.base.port,
    path,
    method: "POST",
    agent: to.agent,
    headers,
  });
  const onAbort = () => req.destroy(new ConnectError("the call was cancelled", Code.Canceled));
  signal?.addEventListener("abort", onAbort, { once: true });
  const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
    req.on("response", resolve);
    req.on("error", (err: Error) =>
      reject(
        err instanceof ConnectError
          ? err
          : new ConnectError(`${path}: ${err.message}`, Code.Unavailable, undefined, undefined, err),
      ),
    );
    req.end(body);
  }).catch((err: unknown) => {
    signal?.removeEventListener("abort", onAbort);
    throw err;
  });
  const resHeaders = new Headers();
  for (const [k, v] of Object.entries(res.headers))
    if (v !== undefined) resHeaders.set(k, Array.isArray(v) ? v.join(", ") : v);
  const type = resHeaders.get("content-type") ?? "";
  if (res.statusCode !== 200 || !/^application\/connect\+proto\b/.test(type)) {
    const chunks: Buffer[] = [];
    for await (const c of res) chunks.push(c as Buffer);
    signal?.removeEventListener("abort", onAbort);
    const status = res.statusCode ?? 0;
    const fallback = new ConnectError(
      `HTTP ${status}`,
      status === 200 ? Code.Internal : codeFromHttpStatus(status),
      resHeaders,
    );
    throw /^application\/json\b/.test(type)
      ? errorFromJsonBytes(Buffer.concat(chunks), resHeaders, fallback)
      : fallback;
  }
  const trailer = new Headers();
  res.on("data", (chunk: Buffer) => reader.push(chunk));
  res.on("end", () => reader.end());
  res.on("error", (err: Error) =>
    reader.fail(
      err instanceof ConnectError
        ? err
        : new ConnectError(`${path}: ${err.message}`, Code.Unavailable, undefined, undefined, err),
    ),
  );
  req.on("error", (err: Error) =>
    reader.fail(
      err instanceof ConnectError
        ? err
        : new ConnectError(`${path}: ${err.message}`, Code.Unavailable, undefined, undefined, err),
    ),
  );

  async function* messages(): AsyncGenerator<MessageShape<O>> {
    try {
      for (;;) {
        const next = await reader.next();
        if (next.end) {
          next.end.metadata.forEach((v, k) => trailer.set(k, v));
          if (next.end.error) throw next.end.error;
          return;
        }
        yield next.message!;
      }
    } finally {
      signal?.removeEventListener("abort", onAbort);
      if (!res.complete) req.destroy();
    }
  }
  return {
    stream: true,
    service: method.parent,
    method,
    header: resHeaders,
    message: messages(),
    trailer,
  } as StreamResponse<I, O>;
}

/** A Connect call's request headers: the node's own, the protocol's, the caller's, a deadline. */
export function callHeaders(
  own: Record<string, string>,
  contentType: string,
  length: number,
  header: HeadersInit | undefined,
  timeoutMs: number | undefined,
): Record<string, string | number> {
  const headers: Record<string, string | number> = {
    ...own,
    "content-type": contentType,
    "connect-protocol-version": "1",
    "content-length": length,
  };
  if (header) new Headers(header).forEach((v, k) => (headers[k] = v));
  if (timeoutMs !== undefined) headers["connect-timeout-ms"] = Math.max(1, Math.ceil(timeoutMs));
  return headers;
}

type Item<T> = { message?: T; end?: ReturnType<typeof endStreamFromJson> };

/** Envelopes cut from the response's chunks, handed to one reader in order. */
class EnvelopeReader<T> {
  private buf: Buffer = Buffer.alloc(0);
  private readonly items: Item<T>[] = [];
  private done = false;
  private error: unknown;
  private wake: (() => void) | undefined;

  constructor(private readonly decode: (bytes: Uint8Array) => T) {}

  push(chunk: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    try {
      while (this.buf.length >= 5) {
        const len = this.buf.readUInt32BE(1);
        if (this.buf.length < 5 + len) break;
        const flags = this.buf[0];
        const bytes = this.buf.subarray(5, 5 + len);
        this.buf = this.buf.subarray(5 + len);
        if (flags & COMPRESSED)
          throw new ConnectError("the tower sent a compressed message, which was not asked for", Code.Internal);
        this.items.push(flags & END_STREAM ? { end: endStreamFromJson(bytes) } : { message: this.decode(bytes) });
      }
    } catch (err) {
      this.fail(
        err instanceof ConnectError
          ? err
          : new ConnectError(`a message from the tower cannot be read: ${(err as Error).message}`, Code.Internal),
      );
    }
    this.wake?.();
  }

  end(): void {
    this.done = true;
    this.wake?.();
  }

  fail(err: unknown): void {
    this.error ??= err;
    this.wake?.();
  }

  /** The next item; a response that ended without an end-stream envelope is refused as a protocol error. */
  async next(): Promise<Item<T>> {
    for (;;) {
      const item = this.items.shift();
      if (item) return item;
      if (this.error !== undefined) throw this.error;
      if (this.done) {
        if (this.buf.length) throw new ConnectError("the stream ended inside a message", Code.DataLoss);
        throw new ConnectError("the stream ended without its end-stream message", Code.Unavailable);
      }
      await new Promise<void>((r) => (this.wake = r));
      this.wake = undefined;
    }
  }
}
