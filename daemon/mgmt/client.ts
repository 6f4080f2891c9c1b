// Clients of the daemon sockets: a Connect transport for the generated clients, and
// one-line helpers for JSON-RPC on mgmt.sock and the secrets line protocol.
import net from "node:net";
import type { Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { EpError, isErrorCode } from "../../common/errors.js";
import { JSON_RPC_ERRORS } from "./json-rpc.js";
import type { JsonRpcErrorObject } from "./json-rpc.js";

/** A Connect transport over a daemon's Unix socket: `createClient(DaemonService, createMgmtTransport(path))`. */
export function createMgmtTransport(socketPath: string): Transport {
  return createConnectTransport({
    baseUrl: "http://localhost",
    httpVersion: "1.1",
    nodeOptions: { socketPath },
  });
}

export interface LineCallOptions {
  /** Give up after this long; 30 s unless told. */
  timeoutMs?: number;
}

let nextId = 1;

/** Calls one JSON-RPC method on mgmt.sock; resolves to the result, rejects with the EpError the daemon reported. */
export async function jsonRpcCall<T = unknown>(
  socketPath: string,
  method: string,
  params: Record<string, unknown> = {},
  opts: LineCallOptions = {},
): Promise<T> {
  const id = nextId++;
  const line = await requestLine(socketPath, JSON.stringify({ jsonrpc: "2.0", id, method, params }), opts);
  let response: { id?: unknown; result?: unknown; error?: JsonRpcErrorObject };
  try {
    response = JSON.parse(line) as typeof response;
  } catch {
    throw new EpError("internal", `the daemon on ${socketPath} answered with something that is not JSON`);
  }
  if (response.error) throw fromJsonRpcError(response.error);
  if (response.id !== id)
    throw new EpError("internal", `the daemon answered request ${String(response.id)}, not ${id}`);
  return response.result as T;
}

/** Reads one secret through the secrets line protocol (what `epd get-secret` does). */
export async function getSecretLine(
  socketPath: string,
  session: string,
  name: string,
  opts: LineCallOptions = {},
): Promise<string> {
  const line = await requestLine(socketPath, JSON.stringify({ op: "get", session, name }), opts);
  let reply: { ok?: boolean; value?: unknown; error?: { code?: string; message?: string } };
  try {
    reply = JSON.parse(line) as typeof reply;
  } catch {
    throw new EpError("internal", `the broker on ${socketPath} answered with something that is not JSON`);
  }
  if (reply.ok === true && typeof reply.value === "string") return reply.value;
  const code = reply.error?.code ?? "internal";
  throw new EpError(isErrorCode(code) ? code : "internal", reply.error?.message);
}

function fromJsonRpcError(error: JsonRpcErrorObject): EpError {
  const code = error.data?.code;
  const details = error.data?.details;
  if (typeof code === "string" && isErrorCode(code)) return new EpError(code, error.message, details);
  if (error.code === JSON_RPC_ERRORS.methodNotFound) return new EpError("route_not_found", error.message, details);
  if (error.code === JSON_RPC_ERRORS.parseError) return new EpError("invalid_json", error.message, details);
  if (error.code === JSON_RPC_ERRORS.invalidRequest || error.code === JSON_RPC_ERRORS.invalidParams) {
    return new EpError("invalid_argument", error.message, details);
  }
  return new EpError("internal", error.message, details);
}

/** Sends one line and resolves to the first line of the answer. */
function requestLine(socketPath: string, line: string, opts: LineCallOptions): Promise<string> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  return new Promise((resolve, reject) => {
    const socket = net.connect(socketPath);
    const chunks: Buffer[] = [];
    let settled = false;
    const settle = (err: EpError | undefined, value?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (err) reject(err);
      else resolve(value ?? "");
    };
    const timer = setTimeout(
      () =>
        settle(new EpError("unavailable", `no answer from ${socketPath} within ${timeoutMs} ms`, { path: socketPath })),
      timeoutMs,
    );
    socket.on("connect", () => socket.write(line + "\n"));
    socket.on("data", (chunk: Buffer) => {
      const nl = chunk.indexOf(0x0a);
      if (nl === -1) {
        chunks.push(chunk);
        return;
      }
      chunks.push(chunk.subarray(0, nl));
      settle(undefined, Buffer.concat(chunks).toString("utf8"));
    });
    socket.on("end", () => settle(new EpError("unavailable", `${socketPath} closed the connection without answering`)));
    socket.on("error", (err: NodeJS.ErrnoException) => {
      const missing = err.code === "ENOENT" || err.code === "ECONNREFUSED";
      const why = missing ? "no daemon is listening there (is epd running?)" : err.message;
      settle(new EpError("unavailable", `cannot reach ${socketPath}: ${why}`, { path: socketPath }));
    });
  });
}
