// The node-link half of replication (replication/replication.ts explains the whole): a command for a node
// linked to another replica is NOTIFYed on the link channel to the owner (split into frames when
// long), which delivers it and answers; no answer within the timeout means nobody holds the link.
import { randomBytes } from "node:crypto";
import type { Clock, ClockTimer } from "../../../common/clock.js";
import { EpError } from "../../../common/errors.js";
import type { Logger } from "../../../common/log.js";
import type { LinkCommand } from "../fleet/types.js";
import type { LocalLinks, ReplicaSignals, ReplicatedStore, ReplicationStats } from "./types.js";

/** Bytes of message text per NOTIFY; PostgreSQL allows 7,999 and the frame header needs a few. */
const CHUNK = 7000;

interface LinkRequest {
  t: "req";
  id: string;
  from: string;
  to: string;
  node: string;
  op: "linked" | "send" | "proof";
  msg?: LinkCommand;
  attach_id?: string;
}

interface LinkReply {
  t: "res";
  id: string;
  to: string;
  ok: boolean;
  proof?: string;
}

interface LinkRelayDeps {
  store: ReplicatedStore;
  log: Logger;
  clock: Clock;
  replicaId: string;
  channel: string;
  requestTimeoutMs: number;
  stats: ReplicationStats;
}

export class LinkRelay {
  private local: LocalLinks | undefined;
  private proofOf: ((secret: string, attachId: string) => string) | undefined;
  private closed = false;
  private readonly pending = new Map<string, { resolve: (r: LinkReply | undefined) => void; timer: ClockTimer }>();
  private readonly partial = new Map<string, { parts: string[]; got: number; at: number }>();
  private unlisten: () => Promise<void> = async () => {};

  static async start(deps: LinkRelayDeps): Promise<LinkRelay> {
    const relay = new LinkRelay(deps);
    relay.unlisten = await deps.store.listen(deps.channel, (payload) => relay.received(payload));
    return relay;
  }

  private constructor(private readonly deps: LinkRelayDeps) {}

  serveLinks(local: LocalLinks, proof: (attachSecret: string, attachId: string) => string): void {
    this.local = local;
    this.proofOf = proof;
  }

  async linked(nodeId: string): Promise<boolean> {
    if (this.local?.isLinked(nodeId)) return true;
    return (await this.ask(nodeId, "linked"))?.ok === true;
  }

  async send(nodeId: string, msg: LinkCommand): Promise<boolean> {
    if (this.local?.send(nodeId, msg)) return true;
    return (await this.ask(nodeId, "send", { msg }))?.ok === true;
  }

  async proof(nodeId: string, attachId: string): Promise<string | undefined> {
    const secret = this.local?.attachSecretOf(nodeId);
    if (secret && this.proofOf) return this.proofOf(secret, attachId);
    const r = await this.ask(nodeId, "proof", { attach_id: attachId });
    return r?.ok ? r.proof : undefined;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const p of this.pending.values()) {
      this.deps.clock.clearTimeout(p.timer);
      p.resolve(undefined);
    }
    this.pending.clear();
    // closing: the listener connection goes with the store; a failed UNLISTEN changes nothing
    await this.unlisten().catch(() => {});
  }

  /** Sends one JSON message on the link channel, split into frames `<id> <i> <n> <text>` when long. */
  private async post(msg: LinkRequest | LinkReply): Promise<void> {
    const { store, channel } = this.deps;
    const text = JSON.stringify(msg);
    if (Buffer.byteLength(text) <= CHUNK) return store.notify(channel, `${msg.id} 0 1 ${text}`);
    const parts: string[] = [];
    // slice by characters small enough that even 4-byte characters stay under the limit
    for (let rest = text; rest.length; rest = rest.slice(CHUNK / 4)) parts.push(rest.slice(0, CHUNK / 4));
    // one transaction: the frames arrive together and in order, or not at all
    await store.transaction(async (tx) => {
      const t = tx as unknown as ReplicaSignals;
      for (let i = 0; i < parts.length; i++) await t.notify(channel, `${msg.id} ${i} ${parts.length} ${parts[i]}`);
    });
  }

  /** A whole message from a frame, once all its frames are in (stale partial messages are dropped after a minute). */
  private frame(payload: string): LinkRequest | LinkReply | undefined {
    const m = /^(\S+) (\d+) (\d+) ([\s\S]*)$/.exec(payload);
    if (!m) return undefined;
    const [, id, iRaw, nRaw, text] = m;
    const i = Number(iRaw);
    const n = Number(nRaw);
    let whole = text;
    if (n > 1) {
      const now = this.deps.clock.now();
      for (const [k, v] of this.partial) if (now - v.at > 60_000) this.partial.delete(k);
      let p = this.partial.get(id);
      if (!p) this.partial.set(id, (p = { parts: new Array<string>(n), got: 0, at: now }));
      if (p.parts[i] === undefined) p.got++;
      p.parts[i] = text;
      if (p.got < n) return undefined;
      this.partial.delete(id);
      whole = p.parts.join("");
    }
    try {
      return JSON.parse(whole) as LinkRequest | LinkReply;
    } catch {
      return undefined;
    }
  }

  private received(payload: string): void {
    const msg = this.frame(payload);
    if (!msg || this.closed) return;
    const { replicaId, log, clock } = this.deps;
    if (msg.t === "req") {
      if (msg.to !== replicaId) return;
      this.serve(msg).catch((err: Error) =>
        log.warn("replication could not answer a link command", { error: err.message, node_id: msg.node }),
      );
    } else if (msg.t === "res" && msg.to === replicaId) {
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      clock.clearTimeout(p.timer);
      p.resolve(msg);
    }
  }

  private async serve(req: LinkRequest): Promise<void> {
    const local = this.local;
    if (!local || !local.isLinked(req.node)) return; // not ours (any more): silence means "no"
    const reply: LinkReply = { t: "res", id: req.id, to: req.from, ok: true };
    if (req.op === "send") reply.ok = !!req.msg && local.send(req.node, req.msg);
    else if (req.op === "proof") {
      const secret = local.attachSecretOf(req.node);
      reply.ok = !!secret && !!this.proofOf && !!req.attach_id;
      if (reply.ok) reply.proof = this.proofOf!(secret!, req.attach_id!);
    }
    this.deps.stats.served++;
    await this.post(reply);
  }

  /** The replica holding the node's link according to the store, unless it is this one. */
  private async ownerOf(nodeId: string): Promise<string | undefined> {
    const v = await this.deps.store.getMeta(`link:${nodeId}`);
    const owner = v?.split(" ", 1)[0];
    return owner && owner !== this.deps.replicaId ? owner : undefined;
  }

  private async ask(
    nodeId: string,
    op: LinkRequest["op"],
    extra: Partial<LinkRequest> = {},
  ): Promise<LinkReply | undefined> {
    if (this.closed) return undefined;
    const owner = await this.ownerOf(nodeId);
    if (!owner) return undefined;
    const { clock, replicaId, requestTimeoutMs } = this.deps;
    const id = `${replicaId}.${randomBytes(6).toString("hex")}`;
    const answer = new Promise<LinkReply | undefined>((resolve) => {
      const timer = clock.setTimeout(() => {
        this.pending.delete(id);
        resolve(undefined);
      }, requestTimeoutMs);
      this.pending.set(id, { resolve, timer });
    });
    try {
      await this.post({ t: "req", id, from: replicaId, to: owner, node: nodeId, op, ...extra });
    } catch (err) {
      const p = this.pending.get(id);
      if (p) {
        this.pending.delete(id);
        clock.clearTimeout(p.timer);
        p.resolve(undefined);
      }
      throw new EpError(
        "unavailable",
        `cannot reach the replica holding node ${nodeId}'s link: ${(err as Error).message}`,
      );
    }
    return answer;
  }
}
