// The daemon's mgmt.sock from the CLI: one JSON-RPC 2.0 line per call (the seed's management
// gateway; same services and proto JSON as the Connect face of the socket). Deliberately free of
// Connect and protobuf imports: `ep agent cron list` must start about as fast as node itself.
import net from "node:net";
import { existsSync } from "node:fs";
import { daemonSockets } from "../common/paths.js";

export interface MgmtCallOptions {
  socketPath?: string;
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
}

let nextId = 1;

/** The error catalog is loaded only on failure (it pulls in Connect). */
async function fail(code: string, message: string, details?: Record<string, unknown>, hint?: string): Promise<never> {
  const { EpError, isErrorCode } = await import("../common/errors.js");
  const err = new EpError(isErrorCode(code) ? code : "internal", message, details);
  throw hint ? Object.assign(err, { hint }) : err;
}

/** Calls `method` (e.g. "cron.list") with proto-JSON params; resolves to the proto-JSON result. */
export async function mgmtCall<T = Record<string, unknown>>(
  method: string,
  params: Record<string, unknown> = {},
  opts: MgmtCallOptions = {},
): Promise<T> {
  const path = opts.socketPath ?? daemonSockets(opts.env ?? process.env).mgmt;
  const id = nextId++;
  let line: string;
  try {
    line = await requestLine(path, JSON.stringify({ jsonrpc: "2.0", id, method, params }), opts.timeoutMs ?? 30_000);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === "ENOENT")
      return fail(
        "unavailable",
        `the daemon is not running: no socket at ${path}`,
        { path },
        "start it with 'ep daemon up' (or 'epd run'); EP_HOME chooses the daemon home",
      );
    if (e.code === "ECONNREFUSED")
      return fail(
        "unavailable",
        `the daemon is not running: ${path} is a stale socket nobody answers on`,
        { path },
        "start it with 'ep daemon up'; epd removes the stale socket when it starts",
      );
    if (e.code === "EACCES")
      return fail(
        "forbidden",
        `cannot open ${path}: permission denied (the socket belongs to the daemon's user)`,
        { path },
        "run ep as the user that runs epd",
      );
    return fail("unavailable", `cannot talk to the daemon on ${path}: ${e.message}`, { path });
  }
  let res: {
    id?: unknown;
    result?: T;
    error?: { code: number; message: string; data?: { code?: string; details?: Record<string, unknown> } };
  };
  try {
    res = JSON.parse(line) as typeof res;
  } catch {
    return fail("internal", `the daemon on ${path} answered with something that is not JSON`);
  }
  if (res.error) {
    const code = res.error.data?.code ?? (res.error.code === -32601 ? "route_not_found" : "internal");
    const hint = code === "route_not_found" ? "this daemon does not serve that method yet; upgrade epd" : undefined;
    return fail(code, `daemon: ${res.error.message}`, res.error.data?.details, hint);
  }
  return res.result as T;
}

export function daemonSocketExists(env: NodeJS.ProcessEnv = process.env): boolean {
  return existsSync(daemonSockets(env).mgmt);
}

function requestLine(path: string, line: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(path);
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (err: Error | undefined, value?: string) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      if (err) reject(err);
      else resolve(value ?? "");
    };
    const timer = setTimeout(
      () => finish(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { code: "ETIMEDOUT" })),
      timeoutMs,
    );
    socket.on("connect", () => socket.write(line + "\n"));
    socket.on("data", (chunk: Buffer) => {
      const nl = chunk.indexOf(0x0a);
      if (nl === -1) return void chunks.push(chunk);
      chunks.push(chunk.subarray(0, nl));
      finish(undefined, Buffer.concat(chunks).toString("utf8"));
    });
    socket.on("end", () =>
      finish(Object.assign(new Error("the daemon closed the connection without answering"), { code: "EPIPE" })),
    );
    socket.on("error", (err) => finish(err));
  });
}
