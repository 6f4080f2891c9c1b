// The daemon's one outbound link: NodeService.Session, a gRPC bidi stream over HTTP/2, over which
// work and commands arrive and the runs' outcomes go up (each answered by an ack with its seq);
// against a tower or a proxy that cannot take it (no such method, no HTTP/2 end to end), NodeService.Link,
// a Connect server stream over HTTP/1.1 (outcomes then go up as unary calls, report.ts). Reconnects fast while the
// tower is coming back (250 ms doubling to 1 s for the first 30 s of an outage, so a restarted tower or replica has its
// nodes back within a second of answering), then 1 s doubling to 30 s; treats a silent stream (no
// message, not even the tower's 15 s ping) as dead.
import type { Client } from "@connectrpc/connect";
import type { Clock, ClockTimer } from "../../common/clock.js";
import { toEpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import type { LinkResponse, NodeService } from "../../gen/ep/tower/v1/fleet_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { LinkAgentSchema } from "../../gen/ep/tower/v1/fleet_pb.js";
import { createBackoff } from "../../common/backoff.js";
import { Code, ConnectError } from "@connectrpc/connect";
import { EpError, isErrorCode } from "../../common/errors.js";
import type { SessionOutcomeSchema, SessionRequestSchema } from "../../gen/ep/tower/v1/fleet_pb.js";
import type { ReportProgressRequestSchema } from "../../gen/ep/tower/v1/work_pb.js";

export type LinkState = "connecting" | "connected" | "down";

export interface TowerLinkOptions {
  nodes: Client<typeof NodeService>;
  /** NodeService over HTTP/2 (gRPC): the session; without it, or when it cannot be had, Link over `nodes`. */
  sessions?: Client<typeof NodeService>;
  clock: Clock;
  log: Logger;
  attachSecret: string;
  version: string;
  /** The node's agents as they are when a link opens (LinkRequest.agents): their leases, idle or not. */
  agents(): MessageInitShape<typeof LinkAgentSchema>[];
  /** Every command except hello and ping. */
  onMessage(msg: LinkResponse): void;
  /** After each hello: the daemon catches up on anything it missed while away. */
  onConnected?(): void;
  onState?(state: LinkState): void;
  backoff?: { initialMs?: number; maxMs?: number };
  /** No message for this long means the stream is dead (default 45 s: three tower pings). */
  idleTimeoutMs?: number;
}

export interface TowerLink {
  start(): void;
  state(): LinkState;
  /** How many times a link reached hello. */
  connects(): number;
  /**
   * Runs work the daemon does with the tower without the link (its own claims, the recovery
   * path) only while no link is up or being opened, and holds the next open until it is done: a
   * task claimed that way must be in the open's agents, or the tower, squaring its view with them,
   * would give it back as lost and hand it to another agent while it runs here. False (and work not
   * run) while a link is up or opening.
   */
  offLink(work: () => Promise<unknown>): boolean;
  /** A session is up (connected, both ways): outcomes can go up on it. */
  carriesOutcomes(): boolean;
  /**
   * Sends a run's outcome up the session; resolves once the tower committed it. Throws an EpError
   * when the tower refused or failed it, a ConnectError (unavailable) when the session ended first.
   */
  report(outcome: SessionOutcomeInit["outcome"]): Promise<void>;
  /** Sends a run's progress frames up the session; resolves once the tower took them (as report()). */
  progress(report: MessageInitShape<typeof ReportProgressRequestSchema>): Promise<void>;
  close(): Promise<void>;
}

export function createTowerLink(opts: TowerLinkOptions): TowerLink {
  const { clock, log } = opts;
  // fast while an outage is young (a tower restarting answers again within seconds), then the
  // usual 1 s doubling to 30 s
  const fast = createBackoff({
    initialMs: Math.min(250, opts.backoff?.initialMs ?? 250),
    maxMs: Math.min(1000, opts.backoff?.maxMs ?? 1000),
  });
  const slow = createBackoff(opts.backoff);
  const FAST_FOR_MS = 30_000;
  let downSince: number | undefined;
  const idleMs = opts.idleTimeoutMs ?? 45_000;
  let state: LinkState = "connecting";
  let closed = false;
  let connects = 0;
  let current: AbortController | undefined;
  let sleeping: { timer: ClockTimer; wake(): void } | undefined;
  let loop: Promise<void> | undefined;
  // an attempt is opening or holds a link; work done without it (offLink) in flight
  let attempting = false;
  const offLink = new Set<Promise<unknown>>();
  // the session's way up: messages waiting to be sent, and outcomes waiting for their ack
  let outbox: Outbox | undefined;
  let seq = 0n;
  const acks = new Map<bigint, { resolve(): void; reject(err: unknown): void }>();
  // Link over HTTP/1.1 from the first time a session could not be had on this tower (logged once)
  let linkOnly = !opts.sessions;

  const setState = (s: LinkState) => {
    if (s === state) return;
    state = s;
    opts.onState?.(s);
  };

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const wake = () => {
        clock.clearTimeout(timer);
        sleeping = undefined;
        resolve();
      };
      const timer = clock.setTimeout(wake, ms);
      sleeping = { timer, wake };
    });

  async function once(): Promise<boolean> {
    attempting = true;
    try {
      while (offLink.size) await Promise.allSettled([...offLink]);
      if (closed) return false;
      return await attempt();
    } finally {
      attempting = false;
    }
  }

  async function attempt(): Promise<boolean> {
    const ac = new AbortController();
    current = ac;
    let idle: ClockTimer | undefined;
    const arm = () => {
      if (idle) clock.clearTimeout(idle);
      idle = clock.setTimeout(() => {
        log.warn("link silent; reconnecting", { idle_ms: idleMs });
        ac.abort();
      }, idleMs);
    };
    let hello = false;
    const open = { attachSecret: opts.attachSecret, version: opts.version, agents: opts.agents() };
    const box = linkOnly ? undefined : new Outbox({ message: { case: "open", value: open } });
    try {
      arm();
      const stream = box
        ? opts.sessions!.session(box.messages(), { signal: ac.signal })
        : opts.nodes.link(open, { signal: ac.signal });
      for await (const msg of stream) {
        arm();
        if (msg.command.case === "ack") {
          settle(msg.command.value);
          continue;
        }
        if (msg.command.case === "hello") {
          if (!hello) {
            hello = true;
            connects++;
            fast.reset();
            slow.reset();
            downSince = undefined;
            outbox = box;
            setState("connected");
            log.info("link connected", { node_id: msg.command.value.nodeId });
            opts.onConnected?.();
          }
          continue;
        }
        if (msg.command.case === "ping") continue;
        try {
          opts.onMessage(msg);
        } catch (err) {
          log.error("link message handler failed", { command: msg.command.case, error: (err as Error).message });
        }
      }
      if (!closed) log.warn("link closed by the tower");
    } catch (err) {
      if (box && !hello && !closed && cannotHaveSession(err)) {
        linkOnly = true;
        log.warn(
          "the tower does not take a session here (NodeService.Session " +
            "over HTTP/2); linking over HTTP/1.1, one request per outcome",
          { error: (err as Error).message },
        );
      } else if (!closed) log.warn("link failed", { error: toEpError(err).message });
    } finally {
      if (idle) clock.clearTimeout(idle);
      current = undefined;
      if (box) {
        box.end();
        if (outbox === box) outbox = undefined;
        const gone = new ConnectError("the session ended before the tower answered", Code.Unavailable);
        for (const a of acks.values()) a.reject(gone);
        acks.clear();
      }
    }
    return hello;
  }

  /** One message up the session, answered by the ack with its seq. */
  function sendUp(message: (seq: bigint) => SessionMessage): Promise<void> {
    const box = outbox;
    if (!box) return Promise.reject(new ConnectError("no session is up", Code.Unavailable));
    const n = ++seq;
    return new Promise<void>((resolve, reject) => {
      acks.set(n, { resolve, reject });
      box.push(message(n));
    });
  }

  function settle(ack: { seq: bigint; error?: { code: string; details?: unknown }; message: string }): void {
    const waiting = acks.get(ack.seq);
    if (!waiting) return;
    acks.delete(ack.seq);
    if (!ack.error) return waiting.resolve();
    const code = isErrorCode(ack.error.code) ? ack.error.code : "internal";
    const details =
      ack.error.details && Object.keys(ack.error.details).length
        ? (ack.error.details as Record<string, unknown>)
        : undefined;
    waiting.reject(new EpError(code, ack.message || ack.error.code, details));
  }

  async function run(): Promise<void> {
    while (!closed) {
      const wasConnected = await once();
      if (closed) break;
      setState(wasConnected ? "connecting" : "down");
      downSince ??= clock.now();
      const delay = clock.now() - downSince < FAST_FOR_MS ? fast.next() : slow.next();
      log.info("link reconnecting", { in_ms: delay });
      await sleep(delay);
      if (!closed) setState(state === "down" ? "down" : "connecting");
    }
  }

  return {
    start() {
      loop ??= run();
    },
    state: () => state,
    connects: () => connects,
    carriesOutcomes: () => outbox !== undefined,
    offLink(work) {
      if (closed || attempting || state === "connected") return false;
      const p = work().catch((err: Error) => log.warn("work without the link failed", { error: err.message }));
      offLink.add(p);
      void p.finally(() => offLink.delete(p));
      return true;
    },
    report: (outcome) => sendUp((n) => ({ message: { case: "outcome", value: { seq: n, outcome } } })),
    progress: (report) => sendUp((n) => ({ message: { case: "progress", value: { seq: n, report } } })),
    async close() {
      closed = true;
      current?.abort();
      sleeping?.wake();
      await loop;
      setState("down");
    },
  };
}

type SessionMessage = MessageInitShape<typeof SessionRequestSchema>;
type SessionOutcomeInit = MessageInitShape<typeof SessionOutcomeSchema>;

/** A session's messages up, in order: the open message, then whatever is pushed until the end. */
class Outbox {
  private readonly queue: SessionMessage[];
  private wake: (() => void) | undefined;
  private ended = false;

  constructor(first: SessionMessage) {
    this.queue = [first];
  }

  push(m: SessionMessage): void {
    this.queue.push(m);
    this.wake?.();
  }

  end(): void {
    this.ended = true;
    this.wake?.();
  }

  async *messages(): AsyncGenerator<SessionMessage> {
    for (;;) {
      const m = this.queue.shift();
      if (m) {
        yield m;
        continue;
      }
      if (this.ended) return;
      await new Promise<void>((r) => (this.wake = r));
      this.wake = undefined;
    }
  }
}

/**
 * The session cannot be had from this tower, as opposed to the tower being away: it has no such
 * method (an older tower), or HTTP/2 does not get through (a proxy that speaks HTTP/1.1 only
 * answers the HTTP/2 preface with an error or closes the connection).
 */
function cannotHaveSession(err: unknown): boolean {
  if (!(err instanceof ConnectError)) return false;
  if (err.code === Code.Unimplemented) return true;
  const cause = err.cause as { code?: string } | undefined;
  return (
    /^ERR_HTTP2_(?!STREAM_CANCEL)/.test(cause?.code ?? "") ||
    /HTTP\/1|http2|protocol error|unsupported content type/i.test(err.rawMessage)
  );
}
