// The PTY attach gateway: local viewers on $EP_HOME/epd/epd.sock (0600, WebSocket over the Unix
// socket: GET /attach?agent=…) and the tower's dial-backs. For a dial-back the tower sends an
// `attach` command over the link; the daemon opens a WebSocket to the tower's /api/attach-dial
// with its node JWT and x-ep-attach-proof = base64url(HMAC-SHA256(attach secret, attach id)),
// and serves the attach on that socket exactly as on epd.sock (docs/attach.md).
import { ATTACH_DIAL_PATH, ATTACH_PROOF_HEADER, EPD_ATTACH_PATH } from "../../common/attach.js";
import { createHmac } from "node:crypto";
import { chmod, lstat, unlink } from "node:fs/promises";
import http, { type IncomingMessage } from "node:http";
import net from "node:net";
import type { Duplex } from "node:stream";
import { WebSocket, WebSocketServer } from "ws";
import { EpError, toEpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import type { AttachDial } from "../../gen/ep/tower/v1/fleet_pb.js";
import type { AttachHub } from "./attach-hub.js";
import { closeCodeOf, frameText, parseMode, parseSize, type AttachMode } from "./frames.js";
import type { ResolveTarget } from "./targets.js";

export const ATTACH_PATH = EPD_ATTACH_PATH;
export const DIAL_PATH = ATTACH_DIAL_PATH;
export const PROOF_HEADER = ATTACH_PROOF_HEADER;

/** The proof a daemon sends with a dial-back: the secret never travels. */
export function attachProof(secret: string, attachId: string): string {
  return createHmac("sha256", secret).update(attachId).digest("base64url");
}

export interface AttachGatewayOptions {
  /** epd.sock */
  path: string;
  hub: AttachHub;
  resolve: ResolveTarget;
  log: Logger;
  /** For dial-backs: where the tower is, the node JWT, and this daemon's attach secret (sent on the link). */
  tower: { baseUrl: string; token: string; attachSecret: string };
  /** Dial-backs that do not open within this long are given up (default 10 s). */
  dialTimeoutMs?: number;
}

export interface AttachGateway {
  readonly path: string;
  listen(): Promise<void>;
  /** An `attach` link command: dial the tower back and serve the attach on that socket. */
  /** An attach command from the link: dial back to the tower. */
  handleLink(msg: AttachDial): void;
  close(): Promise<void>;
}

interface AttachParams {
  agent: string;
  mode: AttachMode;
  cols: number;
  rows: number;
  since?: number;
}

function paramsOf(get: (k: string) => unknown): AttachParams {
  const since = get("since");
  let sinceN: number | undefined;
  if (since !== undefined && since !== null && since !== "") {
    sinceN = Number(since);
    if (!Number.isSafeInteger(sinceN) || sinceN < 0)
      throw new EpError("invalid_argument", "since must be a byte offset (a non-negative integer)", { field: "since" });
  }
  const agent = get("agent") ?? get("agent_id");
  return {
    agent: typeof agent === "string" ? agent : "",
    mode: parseMode(get("mode")),
    cols: parseSize("cols", get("cols"), 80),
    rows: parseSize("rows", get("rows"), 24),
    since: sinceN,
  };
}

function refuse(socket: Duplex, err: EpError): void {
  const body = JSON.stringify(err.toJSON());
  socket.once("finish", () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${err.httpStatus} Refused\r\ncontent-type: application/json\r\ncontent-length: ` +
      `${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

async function removeStaleSocket(path: string): Promise<void> {
  try {
    if (!(await lstat(path)).isSocket())
      throw new EpError("invalid_argument", `${path} exists and is not a socket; refusing to replace it`, {
        field: "path",
      });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw err;
  }
  const alive = await new Promise<boolean>((resolve) => {
    const probe = net.connect(path);
    probe.once("connect", () => (probe.destroy(), resolve(true)));
    probe.once("error", () => resolve(false));
  });
  if (alive)
    throw new EpError("already_exists", `another process is serving ${path}; stop it (ep daemon down) first`, { path });
  await unlink(path).catch(() => undefined); // a stale socket may not exist: listen() reports a real problem
}

export function createAttachGateway(o: AttachGatewayOptions): AttachGateway {
  const { hub, log } = o;
  const dialTimeoutMs = o.dialTimeoutMs ?? 10_000;
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024 });
  const dials = new Set<WebSocket>();
  const server = http.createServer((_req, res) => {
    const err = new EpError(
      "invalid_argument",
      `epd.sock speaks WebSocket: GET ${ATTACH_PATH}?agent=<id> with 'Upgrade: websocket' (ep agent attach <id>)`,
    );
    res.writeHead(426, { "content-type": "application/json", upgrade: "websocket" }).end(JSON.stringify(err.toJSON()));
  });
  let listening = false;

  function serve(ws: WebSocket, p: AttachParams, via: string) {
    let target;
    try {
      target = o.resolve(p.agent);
    } catch (err) {
      const ep = toEpError(err);
      ws.send(frameText({ type: "error", code: ep.code, message: ep.message }));
      ws.close(closeCodeOf(ep), ep.code);
      return;
    }
    log.info("attach", { agent: p.agent, target: target.kind, mode: p.mode, via });
    void hub.attach(ws, target, { mode: p.mode, cols: p.cols, rows: p.rows, since: p.since });
  }

  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on("error", () => undefined);
    const url = new URL(req.url ?? "/", "http://epd");
    let p: AttachParams;
    try {
      if (url.pathname !== ATTACH_PATH)
        throw new EpError("route_not_found", `no route ${url.pathname} on epd.sock (use ${ATTACH_PATH}?agent=<id>)`);
      p = paramsOf((k) => url.searchParams.get(k) ?? undefined);
    } catch (err) {
      refuse(socket, toEpError(err));
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => serve(ws, p, "epd.sock"));
  });

  function dial(msg: AttachDial): void {
    const attachId = msg.attachId;
    if (!attachId) return log.warn("attach command without attach_id; ignored");
    // the parameters as a viewer's query names them
    const data: Record<string, unknown> = {
      mode: msg.mode,
      cols: msg.cols,
      rows: msg.rows,
      ...(msg.hasSince ? { since: Number(msg.since) } : {}),
    };
    let p: AttachParams;
    try {
      p = paramsOf((k) => (k === "agent" ? msg.agentId : data[k]));
    } catch (err) {
      return log.warn("attach command with bad parameters; ignored", {
        attach_id: attachId,
        error: (err as Error).message,
      });
    }
    // the replica that holds the browser's socket may name itself; otherwise the tower we link to
    const base = /^https?:\/\//.test(msg.dialUrl) ? msg.dialUrl : o.tower.baseUrl;
    const url = new URL(DIAL_PATH, base.replace(/^http/, "ws"));
    url.searchParams.set("attach_id", attachId);
    const ws = new WebSocket(url, {
      headers: {
        authorization: `Bearer ${o.tower.token}`,
        [PROOF_HEADER]: attachProof(o.tower.attachSecret, attachId),
      },
      handshakeTimeout: dialTimeoutMs,
      maxPayload: 1024 * 1024,
      perMessageDeflate: false,
    });
    dials.add(ws);
    ws.on("close", () => dials.delete(ws));
    ws.on("error", (err) => log.warn("attach dial-back failed", { attach_id: attachId, error: err.message }));
    ws.on("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body += d.toString()));
      res.on("end", () =>
        log.warn("the tower refused the attach dial-back", {
          attach_id: attachId,
          status: res.statusCode,
          body: body.slice(0, 500),
        }),
      );
      ws.terminate();
    });
    ws.on("open", () => serve(ws, p, "tower"));
  }

  return {
    path: o.path,
    async listen() {
      await removeStaleSocket(o.path);
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(o.path, () => {
          server.off("error", reject);
          resolve();
        });
      });
      await chmod(o.path, 0o600);
      listening = true;
    },
    handleLink: dial,
    async close() {
      for (const ws of dials) ws.terminate();
      for (const ws of wss.clients) ws.terminate();
      if (!listening) return;
      listening = false;
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await unlink(o.path).catch(() => undefined); // removed already is fine
    },
  };
}
