// The node links this replica holds: each epd's one outbound command stream (NodeService.Link),
// with the node marked online while it lasts, work handed to its idle agents (fleet/push.ts),
// commands routed to it (cancel, signal, supervise, attach, config_reload, merge), through another
// replica when that one holds the link.
import { randomBytes } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { iso } from "../../../common/clock.js";
import * as fleet from "../../../gen/ep/tower/v1/fleet_pb.js";
import type { EventRow } from "../../store/store.js";
import { EpError, invalidField, toEpError } from "../../../common/errors.js";
import { authorize, type Caller } from "../caller.js";
import type { Deps } from "../deps.js";
import { commit } from "../event-hub.js";
import { createWakeIndex } from "./wake.js";
import { createOffers, type Offers } from "./push.js";
import { assignment } from "../work/index.js";

export { createWakeIndex };

import type { FleetOptions } from "./options.js";
import type { LinkCommand, Send } from "./types.js";

type LinkMessage = fleet.LinkResponse;

interface LinkConnection {
  nodeId: string;
  attachSecret: string;
  /**
   * The tower squared its view with the daemon's (reconcile): only then is work handed to the
   * node. A task claimed for it before would be missing from the open's agents, and the
   * reconcile would give it back as lost while the daemon runs it.
   */
  ready: boolean;
  push(msg: LinkMessage): void;
  /**
   * ends the stream (a newer link replaced it, the tower closes, or — with an error — a session's message was refused)
   */
  close(err?: EpError): void;
}

export interface LinkStream {
  messages: AsyncIterable<LinkMessage>;
}

export function createLinkHub(
  deps: Deps,
  opts: FleetOptions,
  callers: {
    nodeCaller?: (nodeId: string) => Promise<Caller>;
    cachedNodeCaller?: (nodeId: string) => Caller | undefined;
  } = {},
) {
  const { store, clock } = deps;
  const links = new Map<string, LinkConnection>();
  /** agent id -> node id, for routing events to links without a query per event */
  const agentNodes = new Map<string, string>();

  async function nodeOf(agentId: string): Promise<string | undefined> {
    const cached = agentNodes.get(agentId);
    if (cached) return cached;
    const a = await store.getAgent(agentId);
    if (a) agentNodes.set(agentId, a.nodeId);
    return a?.nodeId;
  }

  const push = (nodeId: string, msg: LinkMessage) => {
    const link = links.get(nodeId);
    link?.push(msg);
    return link !== undefined;
  };
  const send: Send = (nodeId, msg) => push(nodeId, create(fleet.LinkResponseSchema, msg));
  /** send(), or through the replica holding the node's link. */
  const deliver = async (nodeId: string, msg: LinkCommand) =>
    send(nodeId, msg) || ((await opts.replication?.send(nodeId, msg)) ?? false);
  const linkedAnywhere = async (nodeId: string) =>
    links.has(nodeId) || ((await opts.replication?.linked(nodeId)) ?? false);

  // Targeted wake-ups (docs/perf-history.md, "Scale"): for the nodes linked to this replica, the
  // agents they carry, by domain. A queued task wakes only the nodes with an agent that could
  // claim it, so the work per task grows with the matching nodes, not with every linked node.
  const reach = createWakeIndex();

  /** The node's link here, once work may be handed over on it (LinkConnection.ready). */
  const ready = (nodeId: string) => links.get(nodeId)?.ready === true;

  async function indexNode(nodeId: string): Promise<void> {
    const rows = await store.listAgents({ nodeId });
    if (!ready(nodeId)) return; // the link closed while we read
    for (const a of rows) if (a.state !== "dead") reach.add(a);
  }

  async function indexAgent(agentId: string): Promise<void> {
    const a = await store.getAgent(agentId);
    if (!a || a.state === "dead" || !ready(a.nodeId)) return;
    reach.add(a);
    if (a.state === "idle") offers?.offerAgent(a.id); // a new agent: work may be waiting for it
  }

  // work handed to idle agents (fleet/push.ts)
  const offers = opts.work ? createOffers(deps, opts.work, { reach, push, ...callers }) : undefined;

  // An outcome's commit claims its agent's next task itself (work/push.ts, Handoff); when it
  // found nothing, the agent.state idle it emits needs no second claim unless a task was queued in
  // the agent's domain since it looked (fleet/wake.ts).
  opts.work?.setHandoff?.({
    mark: (a) => (ready(a.nodeId) ? reach.queuedMark(a.domainId) : undefined),
    lookedEmpty: (agentId, mark) => reach.lookedEmpty(agentId, mark),
    pick: (domainId, runtime, capabilities) => offers?.pick(domainId, runtime, capabilities),
    unpick: (agentId, notIdle) => (notIdle ? reach.setState(agentId, "busy") : reach.unclaim(agentId)),
    send: (a, task) =>
      push(a.nodeId, create(fleet.LinkResponseSchema, { command: { case: "assign", value: assignment(a.id, task) } })),
  });

  // Route committed events to the links that care: work for idle agents, cancels.
  const unsubscribe = deps.hub.subscribe((events: readonly EventRow[]) => {
    for (const e of events) if (e.taskId && e.status === "queued") reach.noteQueued(e.domainId);
    if (links.size) route(events, { reach, nodeOf, send, indexAgent, offers });
  });

  /** The node's command stream. Ends when the signal aborts (client gone) or the tower closes. */
  function link(caller: Caller, req: fleet.LinkRequest, signal: AbortSignal): AsyncGenerator<LinkMessage> {
    authorize(caller, "node");
    return serve(caller, req, signal);
  }

  /**
   * The node's session: the link's commands down, its runs' outcomes up (NodeService.Session).
   * The first message opens it as Link's request does; each outcome is committed as
   * CompleteTask/FailTask would commit it and answered with an ack carrying its seq. Outcomes
   * read in one turn start their commits together, so the store commits them in one transaction
   * (its group commit, both dialects), each in its own savepoint: one refused outcome (a lease
   * gone elsewhere) leaves the others committed. The session ends when the daemon closes its side.
   */
  async function* session(
    caller: Caller,
    requests: AsyncIterable<fleet.SessionRequest>,
    signal: AbortSignal,
  ): AsyncGenerator<LinkMessage> {
    authorize(caller, "node");
    const up = requests[Symbol.asyncIterator]();
    const first = await up.next();
    if (first.done || first.value.message.case !== "open")
      throw invalidField("message", "a session's first message is open (what Link's request says)");
    yield* serve(caller, first.value.message.value, signal, (conn) => readOutcomes(caller, up, conn));
  }

  /**
   * The rest of a session's messages: outcomes and progress, each acknowledged on the link once settled; the session
   * ends with the daemon's side.
   */
  async function readOutcomes(
    caller: Caller,
    up: AsyncIterator<fleet.SessionRequest>,
    conn: LinkConnection,
  ): Promise<void> {
    const ack = (seq: bigint, err?: unknown) => {
      const e = err === undefined ? undefined : toEpError(err);
      if (e?.code === "internal")
        deps.log.error("an outcome on a session failed", {
          node_id: conn.nodeId,
          error: e.message,
          stack: (e.cause as Error | undefined)?.stack ?? e.stack,
        });
      const error = e && { code: e.code, details: (e.details ? JSON.parse(JSON.stringify(e.details)) : {}) as never };
      conn.push(
        create(fleet.LinkResponseSchema, {
          command: { case: "ack", value: { seq, ...(e ? { error, message: e.message } : {}) } },
        }),
      );
    };
    try {
      for (;;) {
        const r = await up.next();
        if (r.done) break;
        const m = r.value.message;
        if (m.case === "open") throw invalidField("message", "a session opens once");
        const work = opts.work;
        if (!work) throw new EpError("unavailable", "this tower takes no outcomes");
        let seq: bigint;
        let done: Promise<unknown>;
        if (m.case === "outcome") {
          const o = m.value;
          seq = o.seq;
          done =
            o.outcome.case === "complete"
              ? work.completeTask(caller, o.outcome.value)
              : o.outcome.case === "fail"
                ? work.failTask(caller, o.outcome.value)
                : Promise.reject(invalidField("outcome", "an outcome is complete or fail"));
        } else if (m.case === "progress") {
          seq = m.value.seq;
          done = m.value.report
            ? work.reportProgress(caller, m.value.report)
            : Promise.reject(invalidField("report", "progress carries its report"));
        } else throw invalidField("message", "a session message is open, outcome or progress");
        done.then(
          () => ack(seq),
          (err: unknown) => ack(seq, err),
        );
      }
    } catch (err) {
      // a daemon gone mid-stream reads as an error here too (the link's end says nothing either);
      // a message the tower refuses ends the session with that error
      conn.close(err instanceof EpError ? err : undefined);
      return;
    }
    conn.close();
  }

  async function* serve(
    caller: Caller,
    req: fleet.LinkRequest,
    signal: AbortSignal,
    upstream?: (conn: LinkConnection) => Promise<void>,
  ): AsyncGenerator<LinkMessage> {
    const nodeId = caller.nodeId!;
    const queue: LinkMessage[] = [];
    let wake: (() => void) | undefined;
    let closed = false;
    let refused: EpError | undefined;
    const conn: LinkConnection = {
      nodeId,
      attachSecret: req.attachSecret,
      ready: false,
      push(msg) {
        queue.push(msg);
        wake?.();
      },
      close(err) {
        closed = true;
        refused ??= err;
        wake?.();
      },
    };
    links.get(nodeId)?.close(); // replaced by this newer link
    links.set(nodeId, conn);
    reach.dropNode(nodeId);
    // several replicas: the store says which one holds the link (tower/domain/replication/replication.ts)
    const ownerToken = opts.replication?.linkToken(randomBytes(9).toString("base64url"));
    const onAbort = () => wake?.();
    signal.addEventListener("abort", onAbort);
    const ping = setInterval(
      () => conn.push(create(fleet.LinkResponseSchema, { command: { case: "ping", value: {} } })),
      opts.pingMs ?? 15_000,
    );
    ping.unref();
    await markOnline(deps, nodeId, ownerToken);
    try {
      // the agents as the daemon has them: what was handed over and lost with the last link goes
      // back to the queue, each agent idle or busy (work/push.ts reconcile). Until it is done no
      // work is handed to the node (not even by an outcome: ready is false) and the session's
      // outcomes wait unread.
      await opts.work?.reconcile(nodeId, req.agents);
      conn.ready = !closed;
      if (!closed) void upstream?.(conn);
      // indexed before hello, so every later task finds this node's agents
      await indexNode(nodeId);
      yield create(fleet.LinkResponseSchema, {
        command: { case: "hello", value: { nodeId, towerTime: timestampFromMs(clock.now()) } },
      });
      // then the idle ones get what is queued for them
      if (offers && links.get(nodeId) === conn) for (const id of reach.idleOn(nodeId)) offers.offerAgent(id);
      while (!signal.aborted && !closed) {
        const msg = queue.shift();
        if (msg) {
          yield msg;
          continue;
        }
        await new Promise<void>((r) => (wake = r));
        wake = undefined;
      }
      if (refused) throw refused;
    } finally {
      clearInterval(ping);
      signal.removeEventListener("abort", onAbort);
      if (links.get(nodeId) === conn) {
        links.delete(nodeId);
        reach.dropNode(nodeId);
        await markOffline(deps, nodeId, ownerToken).catch((err: Error) =>
          deps.log.warn(
            "could not mark a node offline after its link closed (the next link or the lease sweep corrects it)",
            { node_id: nodeId, error: err.message },
          ),
        );
      }
    }
  }

  return {
    link,
    session,
    /** A new agent: routed to its node, and woken for work when its node is linked here. */
    enrolled(a: {
      id: string;
      domainId: string;
      nodeId: string;
      runtime: string;
      capabilities: string[];
      state?: string;
    }): void {
      agentNodes.set(a.id, a.nodeId);
      if (!ready(a.nodeId)) return;
      reach.add(a);
      if (a.state === "idle") offers?.offerAgent(a.id);
    },
    send,
    deliver,
    linkedAnywhere,
    isLinked: (nodeId: string) => links.has(nodeId),
    /** How many node links this replica holds (/metrics). */
    linkedCount: () => links.size,
    wakeTargets: (domainId: string, runtime = "", capabilities: string[] = []) => [
      ...reach.nodesFor(domainId, runtime, capabilities),
    ],
    attachSecretOf: (nodeId: string) => links.get(nodeId)?.attachSecret,
    close() {
      unsubscribe();
      for (const conn of links.values()) conn.close();
      links.clear();
    },
  };
}

/** The node is linked (here): online, and this replica recorded as the link's owner when there are several. */
async function markOnline(deps: Deps, nodeId: string, ownerToken: string | undefined): Promise<void> {
  await commit(deps, async (tx, emit) => {
    await tx.updateNode(nodeId, { status: "online", lastSeenAt: iso(deps.clock.now()) });
    if (ownerToken) await tx.setMeta(`link:${nodeId}`, ownerToken);
    emit({ type: "matrix", name: "node.online", status: "online", payload: { node_id: nodeId } });
  });
}

/**
 * The node's link closed: offline with its agents (they cannot run while the node is away),
 * unless a newer link on another replica owns it by now.
 */
async function markOffline(deps: Deps, nodeId: string, ownerToken: string | undefined): Promise<void> {
  const ownerKey = `link:${nodeId}`;
  const now = () => iso(deps.clock.now());
  await commit(deps, async (tx, emit) => {
    if (ownerToken) {
      // the node row lock orders this against a newer link's "online" on another replica
      await tx.updateNode(nodeId, { lastSeenAt: now() });
      if ((await tx.getMeta(ownerKey)) !== ownerToken) return;
      await tx.setMeta(ownerKey, "");
    }
    await tx.updateNode(nodeId, { status: "offline", lastSeenAt: now() });
    emit({ type: "matrix", name: "node.offline", status: "offline", payload: { node_id: nodeId } });
    for (const a of await tx.listAgents({ nodeId })) {
      if (a.state === "offline") continue;
      await tx.updateAgent(a.id, { state: "offline" });
      emit({
        type: "matrix",
        name: "agent.state",
        domainId: a.domainId,
        agentId: a.id,
        status: "offline",
        payload: { agent_id: a.id, from: a.state, to: "offline", reason: "node link closed" },
      });
    }
  });
}

/**
 * Committed events → the links: the wake index kept current, work offered to idle agents, cancels to the holder's node.
 */
function route(
  events: readonly EventRow[],
  {
    reach,
    nodeOf,
    send,
    indexAgent,
    offers,
  }: {
    reach: ReturnType<typeof createWakeIndex>;
    nodeOf(agentId: string): Promise<string | undefined>;
    send: Send;
    indexAgent(agentId: string): Promise<void>;
    offers?: Offers;
  },
): void {
  const claimedLater = claimsAfter(events);
  for (const [i, e] of events.entries()) {
    if (e.type !== "matrix") continue;
    if (e.name === "agent.enrolled" && e.agentId) void indexAgent(e.agentId);
    else if (e.name === "agent.state" && e.status === "dead" && e.agentId) reach.remove(e.agentId);
    else if (e.name === "agent.state" && e.agentId) {
      reach.setState(e.agentId, e.status);
      // any state change says whether the outcome's look still stands (only its own idle uses it)
      if (reach.mayHaveWork(e.agentId) && e.status === "idle") offers?.offerAgent(e.agentId);
    } else if (e.taskId && e.status === "queued" && e.agentId) {
      // assigned work (a broadcast's runs too): its assignee, if idle on a node linked here
      offers?.offerAgent(e.agentId);
    } else if (e.taskId && e.status === "queued" && e.payload.claim_policy !== "broadcast") {
      // queued and claimed in the same commit (a child its parent's agent took at once): nothing to offer
      if ((claimedLater.get(e.taskId) ?? -1) > i) continue;
      const runtime = typeof e.payload.runtime === "string" ? e.payload.runtime : "";
      const capabilities = Array.isArray(e.payload.capabilities)
        ? e.payload.capabilities.filter((c): c is string => typeof c === "string")
        : [];
      offers?.offerTask(e.taskId, e.domainId, runtime, capabilities);
    } else if (e.taskId && e.name === "task.cancelled" && e.agentId) {
      const agentId = e.agentId;
      const taskId = e.taskId;
      const reason = typeof e.payload.reason === "string" ? e.payload.reason : "cancelled on the tower";
      void nodeOf(agentId).then(
        (n) => n && send(n, { command: { case: "cancel", value: { taskId, agentId, reason } } }),
      );
    }
  }
}

/** The index of each task's last task.claimed among these events (none: no claim among them). */
function claimsAfter(events: readonly EventRow[]): Map<string, number> {
  const at = new Map<string, number>();
  for (const [i, e] of events.entries()) if (e.name === "task.claimed" && e.taskId) at.set(e.taskId, i);
  return at;
}
