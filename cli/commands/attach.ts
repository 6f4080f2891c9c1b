// ep agent attach <id>: the agent's terminal in this one, in raw mode, until the detach key
// (Ctrl-] unless --detach-key says otherwise). Through the local daemon's epd.sock when the agent
// lives on this node, else through the tower's /api/attach-ws (docs/attach.md).
import { ATTACH_WS_PATH } from "../../common/attach.js";
import { existsSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import { WebSocket } from "ws";
import { EpError, isErrorCode, type ErrorCode } from "../../common/errors.js";
import { daemonSockets } from "../../common/paths.js";
import { ExitCode, UsageError, type Context } from "../context.js";

/** `ctrl-]`, `ctrl-a`, … → the byte the terminal sends for it. */
export function detachByte(spec: string): number {
  const m = /^(?:ctrl|c)-(.)$/i.exec(spec.trim());
  if (!m) throw new UsageError(`--detach-key must look like ctrl-] or ctrl-q (got ${JSON.stringify(spec)})`);
  const code = m[1].toUpperCase().charCodeAt(0);
  if (code < 0x40 || code > 0x5f) throw new UsageError(`--detach-key ctrl-${m[1]} is not a control character`);
  return code & 0x1f;
}

interface Session {
  outcome: "detached" | "exited" | "error" | "dropped" | "not_local";
  offset: number;
  error?: EpError;
}

export async function run(ctx: Context): Promise<number> {
  const agent = ctx.args[0];
  const mode = ctx.opts["read-only"] === true ? "ro" : "rw";
  const detach = detachByte(ctx.str("detach-key") ?? "ctrl-]");
  const sock = daemonSockets(ctx.env).attach;
  const stdin = process.stdin;
  const stdout = process.stdout;
  const size = () => ({ cols: stdout.columns || 80, rows: stdout.rows || 24 });
  let local = ctx.opts.tower !== true && existsSync(sock);

  const urlFor = (since: number | undefined) => {
    const q = new URLSearchParams({ mode, cols: String(size().cols), rows: String(size().rows) });
    if (since !== undefined) q.set("since", String(since));
    if (local) {
      q.set("agent", agent);
      return { url: `ws+unix://${sock}:/attach?${q}`, headers: {} };
    }
    q.set("agent_id", agent);
    const token = ctx.token();
    if (!token) throw new EpError("unauthenticated", "no token for the tower; set EP_TOKEN or run 'ep login'");
    return {
      url: `${ctx.url().replace(/^http/, "ws")}${ATTACH_WS_PATH}?${q}`,
      headers: { authorization: `Bearer ${token}` },
    };
  };

  const raw = stdin.isTTY === true;
  if (raw) stdin.setRawMode(true);
  stdin.resume();
  const restore = () => {
    if (raw) stdin.setRawMode(false);
    stdin.pause();
  };

  function once(since: number | undefined): Promise<Session> {
    return new Promise((resolve) => {
      const { url, headers } = urlFor(since);
      const ws = new WebSocket(url, { headers, perMessageDeflate: false });
      let offset = since ?? 0;
      let settled: Session | undefined;
      const finish = (s: Session) => {
        if (settled) return;
        settled = s;
        stdin.off("data", onInput);
        stdout.off("resize", onResize);
        if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) ws.close();
        resolve(s);
      };
      const onInput = (d: Buffer) => {
        const at = d.indexOf(detach);
        if (at >= 0) {
          if (at > 0 && ws.readyState === ws.OPEN) ws.send(d.subarray(0, at), { binary: true });
          return finish({ outcome: "detached", offset });
        }
        if (ws.readyState === ws.OPEN) ws.send(d, { binary: true });
      };
      const onResize = () => ws.readyState === ws.OPEN && ws.send(JSON.stringify({ type: "resize", ...size() }));
      ws.on(
        "unexpected-response",
        (_req, res) => void refusalOf(res).then((error) => finish({ outcome: "error", offset, error })),
      );
      ws.on("error", (err) =>
        finish({
          outcome: since === undefined ? "error" : "dropped",
          offset,
          error: new EpError("unavailable", `attach connection failed: ${err.message}`),
        }),
      );
      ws.on("open", () => {
        stdin.on("data", onInput);
        stdout.on("resize", onResize);
      });
      ws.on("message", (data: Buffer, isBinary) => {
        if (isBinary) {
          offset += data.length;
          stdout.write(data);
          return;
        }
        const f = JSON.parse(data.toString()) as Record<string, unknown>;
        if (f.type === "hello") {
          offset = Number(f.offset);
          if (f.reset && since !== undefined) stdout.write("\x1bc");
          if (f.mode === "ro" && mode === "rw")
            process.stderr.write("[ep] read-only: your keystrokes are not sent\r\n");
        } else if (f.type === "exit" && f.task_id === undefined) {
          process.stderr.write(
            `\r\n[ep] ${String(f.reason)}` +
              `${f.exit_code !== undefined ? `, exit status ${String(f.exit_code)}` : ""}` +
              `${f.signal ? `, signal ${String(f.signal)}` : ""}\r\n`,
          );
          finish({ outcome: "exited", offset });
        } else if (f.type === "exit") {
          process.stderr.write(
            `\r\n[ep] run ${String(f.task_id)}: ` +
              `${String(f.reason)}${f.exit_code !== undefined ? `, exit status ${String(f.exit_code)}` : ""}\r\n`,
          );
        } else if (f.type === "error") {
          const code = String(f.code);
          if (local && code === "agent_not_found") finish({ outcome: "not_local", offset });
          else
            finish({
              outcome: "error",
              offset,
              error: new EpError(isErrorCode(code) ? code : ("unavailable" as ErrorCode), String(f.message)),
            });
        }
      });
      ws.on("close", () => finish({ outcome: "dropped", offset }));
    });
  }

  try {
    let since: number | undefined;
    for (let tries = 0; ; ) {
      const s = await once(since);
      if (s.outcome === "not_local") {
        local = false; // not on this node: ask the tower
        continue;
      }
      if (s.outcome === "detached") {
        process.stderr.write(`\r\n[ep] detached from ${agent}\r\n`);
        return 0;
      }
      if (s.outcome === "exited") return 0;
      if (s.outcome === "error") throw s.error;
      // the connection dropped: resume where we were, a few times
      if (++tries > 5) throw new EpError("unavailable", `lost the attach to ${agent} and could not resume it`);
      process.stderr.write(`\r\n[ep] connection lost; resuming…\r\n`);
      await new Promise((r) => setTimeout(r, Math.min(1000 * 2 ** (tries - 1), 8000)));
      since = s.offset;
    }
  } catch (err) {
    if (err instanceof EpError && !ctx.json) {
      process.stderr.write(`ep: ${err.message}\n`);
      throw new ExitCode(err.exitCode);
    }
    throw err;
  } finally {
    restore();
  }
}

/** The error an attach endpoint answered instead of upgrading (EP's JSON error, or its HTTP status). */
function refusalOf(res: IncomingMessage): Promise<EpError> {
  return new Promise((resolve) => {
    let body = "";
    res.on("data", (c: Buffer) => (body += c.toString()));
    res.on("end", () => {
      try {
        const e = (JSON.parse(body) as { error: { code: string; message: string } }).error;
        resolve(new EpError(isErrorCode(e.code) ? e.code : "unavailable", e.message));
      } catch {
        resolve(new EpError("unavailable", `the attach endpoint answered HTTP ${res.statusCode}`));
      }
    });
  });
}
