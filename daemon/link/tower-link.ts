// The daemon's one outbound command stream: NodeService.Link, a Connect server stream over
// HTTP/1.1, over which work and commands arrive. Reconnects fast while the tower is coming back
// (250 ms doubling to 1 s for the first 30 s of an outage, so a restarted tower or replica has its
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

export type LinkState = "connecting" | "connected" | "down";

export interface TowerLinkOptions {
  nodes: Client<typeof NodeService>;
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
  close(): Promise<void>;
}

export function createTowerLink(opts: TowerLinkOptions): TowerLink {
  const { clock, log } = opts;
  // fast while an outage is young (a tower restarting answers again within seconds), then the
  // usual 1 s doubling to 30 s
  const fast = createBackoff({ initialMs: Math.min(250, opts.backoff?.initialMs ?? 250), maxMs: Math.min(1000, opts.backoff?.maxMs ?? 1000) });
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
    try {
      arm();
      for await (const msg of opts.nodes.link({ attachSecret: opts.attachSecret, version: opts.version, agents: opts.agents() }, { signal: ac.signal })) {
        arm();
        if (msg.command.case === "hello") {
          if (!hello) {
            hello = true;
            connects++;
            fast.reset();
            slow.reset();
            downSince = undefined;
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
      if (!closed) log.warn("link failed", { error: toEpError(err).message });
    } finally {
      if (idle) clock.clearTimeout(idle);
      current = undefined;
    }
    return hello;
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
    async close() {
      closed = true;
      current?.abort();
      sleeping?.wake();
      await loop;
      setState("down");
    },
  };
}
