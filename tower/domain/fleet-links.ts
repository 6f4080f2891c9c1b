// The node links this replica holds: each epd's one outbound command stream (NodeService.Link),
// with the node marked online while it lasts, commands routed to it (task_ready, cancel, signal,
// supervise, attach, config_reload), through another replica when that one holds the link, and
// the targeted wake-ups of new work (fleet-wake.ts).
import { randomBytes } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import type { JsonObject } from "@bufbuild/protobuf";
import { iso } from "../../common/clock.js";
import * as fleet from "../../gen/ep/tower/v1/fleet_pb.js";
import type { EventRow } from "../store/store.js";
import { authorize, type Caller } from "./caller.js";
import type { Deps } from "./deps.js";
import { commit } from "./event-hub.js";
import { createWakeIndex, wakeUps } from "./fleet-wake.js";

export { createWakeIndex, wakeUps };

import type { FleetOptions } from "./fleet.js";

type LinkMessage = fleet.LinkResponse;

interface LinkConnection {
  nodeId: string;
  attachSecret: string;
  push(msg: LinkMessage): void;
}

export interface LinkStream {
  messages: AsyncIterable<LinkMessage>;
}

export function createLinkHub(deps: Deps, opts: FleetOptions) {
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

  function send(nodeId: string, msg: { kind: string; taskId?: string; agentId?: string; data?: JsonObject }): boolean {
    const link = links.get(nodeId);
    if (!link) return false;
    link.push(create(fleet.LinkResponseSchema, msg));
    return true;
  }

  /** send(), or through the replica holding the node's link. */
  async function deliver(nodeId: string, msg: { kind: string; taskId?: string; agentId?: string; data?: JsonObject }): Promise<boolean> {
    return send(nodeId, msg) || ((await opts.replication?.send(nodeId, msg)) ?? false);
  }

  async function linkedAnywhere(nodeId: string): Promise<boolean> {
    return links.has(nodeId) || ((await opts.replication?.linked(nodeId)) ?? false);
  }

  // Targeted wake-ups (docs/PERFORMANCE.md, "Scale"): for the nodes linked to this replica, the
  // agents they carry, by domain. A queued task wakes only the nodes with an agent that could
  // claim it, so the work per task grows with the matching nodes, not with every linked node.
  const reach = createWakeIndex();

  async function indexNode(nodeId: string): Promise<void> {
    const rows = await store.listAgents({ nodeId });
    if (!links.has(nodeId)) return; // the link closed while we read
    for (const a of rows) if (a.state !== "dead") reach.add(a);
  }

  async function indexAgent(agentId: string): Promise<void> {
    const a = await store.getAgent(agentId);
    if (a && a.state !== "dead" && links.has(a.nodeId)) reach.add(a);
  }

  // Route committed events to the links that care: queued work and cancels.
  const unsubscribe = deps.hub.subscribe((events: readonly EventRow[]) => {
    if (!links.size) return;
    for (const e of events) {
      if (e.type !== "matrix") continue;
      if (e.name === "agent.enrolled" && e.agentId) void indexAgent(e.agentId);
      else if (e.name === "agent.state" && e.status === "dead" && e.agentId) reach.remove(e.agentId);
      else if (e.taskId && e.status === "queued" && e.agentId) {
        const assignee = e.agentId;
        void nodeOf(assignee).then((n) => n && send(n, { kind: "task_ready", taskId: e.taskId, agentId: assignee }));
      } else if (e.taskId && e.name === "task.cancelled" && e.agentId) {
        void nodeOf(e.agentId).then((n) => n && send(n, { kind: "cancel", taskId: e.taskId, agentId: e.agentId }));
      }
    }
    for (const [nodeId, msg] of wakeUps(events, reach)) send(nodeId, msg);
  });

  /** The node's command stream. Ends when the signal aborts (client gone) or the tower closes. */
  async function* link(caller: Caller, req: fleet.LinkRequest, signal: AbortSignal): AsyncGenerator<LinkMessage> {
    authorize(caller, "node");
    const nodeId = caller.nodeId!;
    const queue: LinkMessage[] = [];
    let wake: (() => void) | undefined;
    const conn: LinkConnection = {
      nodeId,
      attachSecret: req.attachSecret,
      push(msg) {
        queue.push(msg);
        wake?.();
      },
    };
    links.get(nodeId)?.push(create(fleet.LinkResponseSchema, { kind: "close", data: { reason: "replaced by a newer link" } }));
    links.set(nodeId, conn);
    reach.dropNode(nodeId);
    // several replicas: the store says which one holds the link (tower/domain/replication.ts)
    const ownerKey = `link:${nodeId}`;
    const ownerToken = opts.replication?.linkToken(randomBytes(9).toString("base64url"));
    const onAbort = () => wake?.();
    signal.addEventListener("abort", onAbort);
    const ping = setInterval(() => conn.push(create(fleet.LinkResponseSchema, { kind: "ping" })), opts.pingMs ?? 15_000);
    ping.unref();
    await commit(deps, async (tx, emit) => {
      await tx.updateNode(nodeId, { status: "online", lastSeenAt: iso(clock.now()) });
      if (ownerToken) await tx.setMeta(ownerKey, ownerToken);
      emit({ type: "matrix", name: "node.online", status: "online", payload: { node_id: nodeId } });
    });
    try {
      // indexed before hello: epd claims everything queued so far when it sees hello, and
      // every later task finds this node in the index
      await indexNode(nodeId);
      yield create(fleet.LinkResponseSchema, { kind: "hello", data: { node_id: nodeId, tower_time: iso(clock.now()) } });
      while (!signal.aborted) {
        const msg = queue.shift();
        if (msg) {
          if (msg.kind === "close") return;
          yield msg;
          continue;
        }
        await new Promise<void>((r) => (wake = r));
        wake = undefined;
      }
    } finally {
      clearInterval(ping);
      signal.removeEventListener("abort", onAbort);
      if (links.get(nodeId) === conn) {
        links.delete(nodeId);
        reach.dropNode(nodeId);
        await commit(deps, async (tx, emit) => {
          if (ownerToken) {
            // the node row lock orders this against a newer link's "online" on another replica
            await tx.updateNode(nodeId, { lastSeenAt: iso(clock.now()) });
            if ((await tx.getMeta(ownerKey)) !== ownerToken) return;
            await tx.setMeta(ownerKey, "");
          }
          await tx.updateNode(nodeId, { status: "offline", lastSeenAt: iso(clock.now()) });
          emit({ type: "matrix", name: "node.offline", status: "offline", payload: { node_id: nodeId } });
          // its agents cannot run while the node is away
          for (const a of await tx.listAgents({ nodeId })) {
            if (a.state === "offline") continue;
            await tx.updateAgent(a.id, { state: "offline" });
            emit({ type: "matrix", name: "agent.state", domainId: a.domainId, agentId: a.id, status: "offline", payload: { agent_id: a.id, from: a.state, to: "offline", reason: "node link closed" } });
          }
        }).catch((err: Error) => deps.log.warn("could not mark a node offline after its link closed (the next link or the lease sweep corrects it)", { node_id: nodeId, error: err.message }));
      }
    }
  }

  return {
    link,
    /** A new agent: routed to its node, and woken for work when its node is linked here. */
    enrolled(a: { id: string; domainId: string; nodeId: string; runtime: string; capabilities: string[] }): void {
      agentNodes.set(a.id, a.nodeId);
      if (links.has(a.nodeId)) reach.add(a);
    },
    send,
    deliver,
    linkedAnywhere,
    isLinked: (nodeId: string) => links.has(nodeId),
    wakeTargets: (domainId: string, runtime = "", capabilities: string[] = []) => [...reach.nodesFor(domainId, runtime, capabilities)],
    attachSecretOf: (nodeId: string) => links.get(nodeId)?.attachSecret,
    close() {
      unsubscribe();
      for (const conn of links.values()) conn.push(create(fleet.LinkResponseSchema, { kind: "close" }));
      links.clear();
    },
  };
}
