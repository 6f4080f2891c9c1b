// Mediated attach (docs/attach.md): browser → /api/attach-ws → tower → (link command) → the
// agent's daemon dials /api/attach-dial → the tower splices the two WebSockets. The node never
// accepts a connection; both sockets are opened towards the tower.
//
// Browsers cannot set headers on a WebSocket, so /api/attach-ws takes a one-time `?ticket=`
// from AuthService.CreateTicket {purpose: "attach", agent_id}; a Bearer header or the console's
// session cookie with `?agent_id=` works too. admin/operator attach read-write (unless they ask
// for `mode=ro`), viewers read-only: the tower drops their input and resizes, and tells the
// daemon the mode so it drops them as well.
//
// The dial-back proves itself twice: the node JWT (Authorization) and
// x-ep-attach-proof = base64url(HMAC-SHA256(attach secret, attach id)), where the attach secret
// is the one the node's *current* link announced. A daemon that restarted links again with a new
// secret, so a dial-back from an older process is refused and the next attach just works.
import { credentialOf } from "../credential.js";
import { ATTACH_CLOSE, ATTACH_DIAL_PATH, ATTACH_PROOF_HEADER, ATTACH_WS_PATH } from "../../../common/attach.js";
import { randomBytes } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { ServerResponse, type IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { WebSocketServer, type RawData, type WebSocket } from "ws";
import type { Clock, ClockTimer } from "../../../common/clock.js";
import { EpError, toEpError } from "../../../common/errors.js";
import type { Logger } from "../../../common/log.js";

export { ATTACH_DIAL_PATH, ATTACH_PROOF_HEADER, ATTACH_WS_PATH };
export { attachProof, localAttachRelay, type AttachRelay } from "../../domain/fleet/index.js";
import type { createAttachAdmission, AttachRelay } from "../../domain/fleet/index.js";
export const ATTACH_PATHS = [ATTACH_WS_PATH, ATTACH_DIAL_PATH] as const;

/** Close codes shared with the daemon's gateway (daemon/attach/frames.ts). */
const CLOSE = ATTACH_CLOSE;

/** Who may attach to what: the domain's admission (tower/domain/fleet/attach.ts). */
export type AttachAdmission = ReturnType<typeof createAttachAdmission>;

export interface AttachEdgeDeps {
  admission: AttachAdmission;
  clock: Clock;
  log: Logger;
  /** How a dial request reaches the node's link (this replica's, or the one holding it). */
  relay: AttachRelay;
  /** This replica's own URL as nodes reach it (EP_REPLICA_URL); sent as the dial-back address. */
  replicaUrl?: string;
  /** How long the node has to dial back (default 10 s). */
  dialTimeoutMs?: number;
}

export interface AttachEdge {
  /** Attaches waiting for their node's dial-back. */
  pending(): number;
  /** Spliced pairs. */
  active(): number;
  close(): Promise<void>;
}

interface Pending {
  id: string;
  nodeId: string;
  agentId: string;
  mode: "rw" | "ro";
  browser: WebSocket;
  queued: { data: RawData; isBinary: boolean }[];
  queuedBytes: number;
  timer: ClockTimer;
  /** Set once spliced: where the browser's messages go from then on. */
  forward?: (data: RawData, isBinary: boolean) => void;
}

const MAX_QUEUED = 64 * 1024;
const HIGH_WATER = 4 * 1024 * 1024;

function refuse(socket: Duplex, err: EpError): void {
  const body = JSON.stringify(err.toJSON());
  const status = err.httpStatus;
  const text =
    { 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 503: "Service Unavailable" }[
      status
    ] ?? "Error";
  socket.once("finish", () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\ncontent-type: application/json\r\ncontent-length: ` +
      `${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

function sinceParam(url: URL): number | undefined {
  const raw = url.searchParams.get("since");
  const since = raw === null || raw === "" ? undefined : Number(raw);
  if (since !== undefined && (!Number.isSafeInteger(since) || since < 0))
    throw new EpError("invalid_argument", "since must be a byte offset", { field: "since" });
  return since;
}

function sizeParam(url: URL, name: string, fallback: number): number {
  const raw = url.searchParams.get(name);
  if (raw === null || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 1000)
    throw new EpError("invalid_argument", `${name} must be an integer from 1 to 1000`, { field: name });
  return n;
}

const validClose = (code: number) => code === 1000 || code === 1001 || code === 1011 || (code >= 3000 && code <= 4999);

export function attachAttachWebSocket(app: FastifyInstance, deps: AttachEdgeDeps): AttachEdge {
  const { admission, relay, clock, log } = deps;
  const dialTimeoutMs = deps.dialTimeoutMs ?? 10_000;
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024, perMessageDeflate: false });
  const pendings = new Map<string, Pending>();
  let spliced = 0;

  // ---- the browser (or `ep agent attach` through the tower)

  async function viewerUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, url: URL) {
    let a: Awaited<ReturnType<typeof admitViewer>>;
    try {
      a = await admitViewer(admission, req, url);
    } catch (err) {
      refuse(socket, toEpError(err));
      return;
    }
    wss.handleUpgrade(req, socket, head, (browser) => {
      const p: Pending = {
        id: `att_${randomBytes(18).toString("base64url")}`,
        nodeId: a.agent.nodeId,
        agentId: a.agent.id,
        mode: a.mode,
        browser,
        queued: [],
        queuedBytes: 0,
        timer: clock.setTimeout(() => {
          if (!pendings.delete(p.id)) return;
          fail(
            browser,
            new EpError(
              "node_offline",
              `the node of agent ${p.agentId} did not dial back within ` +
                `${Math.round(dialTimeoutMs / 1000)} s; attach again`,
            ),
          );
        }, dialTimeoutMs),
      };
      pendings.set(p.id, p);
      queueUntilSpliced(p);
      browser.on("close", () => {
        if (pendings.delete(p.id)) clock.clearTimeout(p.timer);
      });
      browser.on("error", () => undefined);
      browser.send(JSON.stringify({ type: "status", state: "dialing" }));
      const dial = {
        agentId: p.agentId,
        attachId: p.id,
        mode: a.mode,
        cols: a.cols,
        rows: a.rows,
        hasSince: a.since !== undefined,
        since: BigInt(a.since ?? 0),
        dialUrl: deps.replicaUrl ?? "",
      };
      log.info("attach requested", {
        attach_id: p.id,
        agent_id: p.agentId,
        node_id: p.nodeId,
        mode: a.mode,
        by: a.caller.subject,
      });
      // not sent (the node is not linked anywhere) or failed: the viewer hears why, unless it left
      const giveUp = (err: EpError) => {
        if (!pendings.delete(p.id)) return;
        clock.clearTimeout(p.timer);
        fail(browser, err);
      };
      relay.send(p.nodeId, { command: { case: "attach", value: dial } }).then(
        (sent) =>
          sent || giveUp(new EpError("node_offline", `agent ${p.agentId}'s node is not connected to the tower`)),
        (err: Error) => giveUp(toEpError(err)),
      );
    });
  }

  // ---- the node's dial-back

  async function admitDial(req: IncomingMessage, url: URL): Promise<Pending> {
    const attachId = url.searchParams.get("attach_id") ?? "";
    if (!attachId) throw new EpError("invalid_argument", "attach_id is required", { field: "attach_id" });
    const p = pendings.get(attachId);
    await admission.admitDial({
      attachId,
      credential: req.headers.authorization ? credentialOf(req.headers) : undefined,
      askedOf: p?.nodeId,
      proof: String(req.headers[ATTACH_PROOF_HEADER] ?? ""),
    });
    pendings.delete(attachId);
    clock.clearTimeout(p!.timer);
    return p!;
  }

  async function dialUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, url: URL) {
    let p: Pending;
    try {
      p = await admitDial(req, url);
    } catch (err) {
      refuse(socket, toEpError(err));
      return;
    }
    if (p.browser.readyState !== p.browser.OPEN)
      return refuse(socket, new EpError("not_found", "the viewer left before the dial-back arrived"));
    wss.handleUpgrade(req, socket, head, (node) =>
      splice(p, node, { clock, log, opened: () => spliced++, closed: () => spliced-- }),
    );
  }

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? "/", "http://tower");
    const handler =
      url.pathname === ATTACH_WS_PATH ? viewerUpgrade : url.pathname === ATTACH_DIAL_PATH ? dialUpgrade : undefined;
    if (!handler) return;
    socket.on("error", () => undefined);
    handler(req, socket, head, url).catch((err: Error) => {
      log.warn("attach upgrade failed", { path: url.pathname, error: err.message });
      socket.destroy();
    });
  };
  app.server.on("upgrade", onUpgrade);

  for (const path of ATTACH_PATHS) {
    app.get(path, async (_req, reply) => {
      const err = new EpError(
        "invalid_argument",
        `GET ${path} needs 'Connection: Upgrade' and 'Upgrade: websocket' (docs/attach.md)`,
      );
      return reply.code(426).header("upgrade", "websocket").send(err.toJSON());
    });
  }

  return {
    pending: () => pendings.size,
    active: () => spliced,
    close: () =>
      new Promise<void>((resolve) => {
        app.server.off("upgrade", onUpgrade);
        for (const p of pendings.values()) clock.clearTimeout(p.timer);
        pendings.clear();
        for (const ws of wss.clients) ws.terminate();
        wss.close(() => resolve());
      }),
  };
}

/**
 * Answers upgrade requests no edge serves with a 404 instead of leaving the socket open: each
 * WebSocket edge listens for its own paths on the server's `upgrade` event and ignores the rest.
 */
/**
 * Node hands every request carrying `Upgrade` to the "upgrade" listeners once one exists. A
 * WebSocket upgrade to a path no edge serves is refused with the JSON error; any other upgrade
 * (`Upgrade: h2c` from `curl --http2`, an HTTP/2 client trying cleartext) is ignored as RFC 9110
 * allows, and the request is answered as the plain HTTP/1.1 request it also is.
 */
export function refuseUnknownUpgrades(app: FastifyInstance, knownPaths: readonly string[]): void {
  const known = new Set(knownPaths);
  app.server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const path = new URL(req.url ?? "/", "http://tower").pathname;
    const websocket = String(req.headers.upgrade ?? "").toLowerCase() === "websocket";
    if (websocket && known.has(path)) return;
    socket.on("error", () => undefined);
    if (websocket) return refuse(socket, new EpError("route_not_found", `no WebSocket route ${path}`));
    serveWithoutUpgrade(app, req, socket, head);
  });
}

function serveWithoutUpgrade(app: FastifyInstance, req: IncomingMessage, socket: Duplex, head: Buffer): void {
  // the parser has let go of the socket: a body must be read from it (and `head`) by hand, so
  // only bodiless requests are served this way; a body with an upgrade offer gets a clear 400
  const hasBody = Number(req.headers["content-length"] ?? 0) > 0 || req.headers["transfer-encoding"] !== undefined;
  if (hasBody || head.length > 0) {
    return refuse(
      socket,
      new EpError(
        "invalid_argument",
        `send this request without 'Upgrade: ${req.headers.upgrade}': the tower answers it over HTTP/1.1 only`,
      ),
    );
  }
  delete req.headers.upgrade;
  req.headers.connection = "close";
  const res = new ServerResponse(req);
  res.shouldKeepAlive = false;
  res.assignSocket(socket as Socket);
  res.on("finish", () => {
    res.detachSocket(socket as Socket);
    socket.end();
  });
  req.push(null); // no body
  app.server.emit("request", req, res);
}

/** Tells a viewer why its attach failed, and closes it. */
function fail(ws: WebSocket, err: EpError) {
  if (ws.readyState !== ws.OPEN) return;
  ws.send(JSON.stringify({ type: "error", code: err.code, message: err.message }));
  ws.close(err.errorClass === "unavailable" ? CLOSE.unavailable : CLOSE.internal, err.code);
}

/**
 * Joins the viewer and the node's dial-back: bytes both ways (a read-only viewer's stop at the
 * tower), a slow viewer pausing the node, either side's close closing the other.
 */
function splice(p: Pending, node: WebSocket, o: { clock: Clock; log: Logger; opened(): void; closed(): void }) {
  const { clock, log } = o;
  const { browser } = p;
  o.opened();
  log.info("attach connected", { attach_id: p.id, agent_id: p.agentId, node_id: p.nodeId, mode: p.mode });
  browser.send(JSON.stringify({ type: "status", state: "connected" }));
  const fromBrowser = (data: RawData, isBinary: boolean) => {
    // a read-only viewer's keystrokes and resizes stop here
    if (p.mode === "ro") return;
    if (node.readyState === node.OPEN) node.send(data, { binary: isBinary });
  };
  for (const q of p.queued) fromBrowser(q.data, q.isBinary);
  p.queued = [];
  p.forward = fromBrowser;
  let paused = false;
  let resumeTimer: ClockTimer | undefined;
  const resumeWhenDrained = () => {
    resumeTimer = undefined;
    if (browser.bufferedAmount > HIGH_WATER / 2 && browser.readyState === browser.OPEN)
      resumeTimer = clock.setTimeout(resumeWhenDrained, 5);
    else {
      paused = false;
      node.resume();
    }
  };
  node.on("message", (data, isBinary) => {
    if (browser.readyState !== browser.OPEN) return;
    browser.send(data, { binary: isBinary });
    // a slow browser slows the node down instead of filling the tower's memory
    if (!paused && browser.bufferedAmount > HIGH_WATER) {
      paused = true;
      node.pause();
      resumeTimer = clock.setTimeout(resumeWhenDrained, 5);
    }
  });
  let ended = false;
  const end = (from: WebSocket, to: WebSocket) => (code: number, reason: Buffer) => {
    if (ended) return;
    ended = true;
    o.closed();
    if (resumeTimer) clock.clearTimeout(resumeTimer);
    if (to.readyState === to.OPEN || to.readyState === to.CONNECTING)
      to.close(validClose(code) ? code : CLOSE.normal, reason.toString().slice(0, 120));
    log.info("attach ended", {
      attach_id: p.id,
      agent_id: p.agentId,
      closed_by: from === browser ? "viewer" : "node",
      code,
    });
  };
  browser.on("close", end(browser, node));
  node.on("close", end(node, browser));
  browser.on("error", () => node.terminate());
  node.on("error", () => browser.terminate());
}

/** Keystrokes typed while the node dials back are kept (a little) and sent once spliced. */
function queueUntilSpliced(p: Pending): void {
  p.browser.on("message", (data, isBinary) => {
    if (p.forward) return p.forward(data, isBinary);
    const size = Array.isArray(data)
      ? data.reduce((n, b) => n + b.length, 0)
      : (data as Buffer | ArrayBuffer).byteLength;
    if (p.queuedBytes + size <= MAX_QUEUED) {
      p.queued.push({ data, isBinary });
      p.queuedBytes += size;
    }
  });
}

/** The viewer's parameters from the URL; who may attach, and how, is the domain's (attach.ts). */
async function admitViewer(admission: AttachAdmission, req: IncomingMessage, url: URL) {
  const admitted = await admission.admitViewer({
    ticket: req.headers.authorization ? undefined : (url.searchParams.get("ticket") ?? undefined),
    credential: () => credentialOf(req.headers),
    agentId: url.searchParams.get("agent_id") ?? "",
    mode: url.searchParams.get("mode"),
  });
  return { ...admitted, cols: sizeParam(url, "cols", 80), rows: sizeParam(url, "rows", 24), since: sinceParam(url) };
}
