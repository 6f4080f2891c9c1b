// Why a task waits (GetTaskResponse.wait): read from the store when someone asks — the agents
// that could run the task, their state and their nodes' status, and a running task's pending
// approvals — so the claim path pays nothing for it. A few indexed reads per GetTask.
import { create } from "@bufbuild/protobuf";
import { hostname } from "node:os";
import { TaskWaitReason, TaskWaitSchema, type TaskWait } from "../../../gen/ep/tower/v1/work_pb.js";
import type { AgentRow, NodeRow, Store, TaskRow } from "../../store/store.js";
import { covers } from "./support.js";

/** The hostname `ep up` registers this machine under (cli/commands/up.ts does the same). */
export function localHostname(): string {
  return hostname().replace(/[^A-Za-z0-9.-]/g, "-") || "localhost";
}

const UNAVAILABLE = new Set(["paused", "dead", "starting", "restarting"]);

/** Why `t` waits, or undefined when nothing holds it back (or it is not waiting at all). */
export async function taskWait(
  store: Store,
  t: TaskRow,
  opts: { towerHost?: string; waitingOn?: string[] } = {},
): Promise<TaskWait | undefined> {
  if (t.kind !== "claimable") return undefined;
  if (t.status === "waiting") {
    const on = opts.waitingOn ?? [];
    const message =
      `it waits for ${on.length === 1 ? "its parent" : "its parents"} ` +
      `${on.join(", ")} to succeed; it is queued the moment the last one does`;
    return create(TaskWaitSchema, { reason: TaskWaitReason.PARENTS, message, waitingOn: on });
  }
  if (t.status === "claimed" || t.status === "running") return approvalWait(store, t);
  // a broadcast's runs wait each on their own
  if (t.status !== "queued" || t.claimPolicy === "broadcast") return undefined;
  const wait = (
    reason: TaskWaitReason,
    message: string,
    agents: AgentRow[] = [],
    extra: { enrollNodeId?: string } = {},
  ) => create(TaskWaitSchema, { reason, message, agentIds: agents.map((a) => a.id), ...extra });

  const inDomain = await store.listAgents({ domainId: t.domainId });
  let candidates: AgentRow[];
  if (t.claimPolicy === "assigned") {
    const assignee = inDomain.find((a) => a.id === t.assigneeAgentId);
    if (!assignee)
      return wait(
        TaskWaitReason.ASSIGNEE_MISSING,
        `its assignee ${t.assigneeAgentId} is not enrolled in the domain; assign it to another agent or cancel it`,
      );
    candidates = [assignee];
  } else {
    if (!inDomain.length) {
      const enrollNodeId = await enrollNode(store, t.domainId, opts.towerHost ?? localHostname());
      const how = enrollNodeId
        ? "enroll one on this machine's node"
        : "enroll one: ep daemon agent enroll --domain <domain> --runtime <runtime>";
      return wait(TaskWaitReason.NO_AGENT_IN_DOMAIN, `no agent serves domain ${t.domainId}; ${how}`, [], {
        enrollNodeId: enrollNodeId ?? "",
      });
    }
    const withRuntime = inDomain.filter((a) => !t.runtime || a.runtime === t.runtime);
    if (!withRuntime.length)
      return wait(
        TaskWaitReason.NO_AGENT_WITH_RUNTIME,
        `no agent of the domain runs ${t.runtime} (its agents run ` +
          `${[...new Set(inDomain.map((a) => a.runtime))].join(", ")}); enroll one with --runtime ${t.runtime}`,
      );
    candidates = withRuntime.filter((a) => covers(a, t));
    if (!candidates.length)
      return wait(
        TaskWaitReason.NO_AGENT_WITH_CAPABILITIES,
        `no ${t.runtime || "agent"} of the domain has all of the ` +
          `capabilities ${t.capabilities.join(", ")}; enroll one with them`,
      );
  }

  const nodes = new Map<string, NodeRow | undefined>();
  for (const id of new Set(candidates.map((a) => a.nodeId))) nodes.set(id, id ? await store.getNode(id) : undefined);
  const linked = candidates.filter((a) => nodes.get(a.nodeId)?.status === "online" && a.state !== "offline");
  const names = (as: AgentRow[]) => as.map((a) => a.name || a.id).join(", ");
  if (!linked.length) {
    const hosts = [...new Set(candidates.map((a) => nodes.get(a.nodeId)?.hostname ?? (a.nodeId || "no node")))].join(
      ", ",
    );
    return wait(
      TaskWaitReason.NODE_OFFLINE,
      `the agents that could run it (${names(candidates)}) are on nodes ` +
        `that are offline or never linked (${hosts}); start epd there`,
      candidates,
    );
  }
  const idle = linked.filter((a) => a.state === "idle");
  if (idle.length)
    return wait(
      TaskWaitReason.AGENT_IDLE,
      `${names(idle)} can take it now; it is handed over as soon as the tower offers it`,
      idle,
    );
  const busy = linked.filter((a) => a.state === "busy");
  if (busy.length)
    return wait(
      TaskWaitReason.AGENTS_BUSY,
      `every agent that could run it is busy (${names(busy)}); it runs when one is free, by priority then age`,
      busy,
    );
  const held = linked.filter((a) => UNAVAILABLE.has(a.state));
  return wait(
    TaskWaitReason.AGENTS_UNAVAILABLE,
    `the agents that could run it are ${[...new Set(held.map((a) => a.state))].join(" or ") || "not ready"} ` +
      `(${names(linked)}); resume or restart one`,
    linked,
  );
}

async function approvalWait(store: Store, t: TaskRow): Promise<TaskWait | undefined> {
  const [pending] = await store.listApprovals({ taskId: t.id, status: "pending", limit: 1 });
  if (!pending) return undefined;
  return create(TaskWaitSchema, {
    reason: TaskWaitReason.APPROVAL,
    message: `its agent waits for a person to approve or reject ${pending.id} (ep approvals ls)`,
    agentIds: t.claimedBy ? [t.claimedBy] : [],
    approvalId: pending.id,
  });
}

/** The node on the tower's own machine that is linked and serves the domain, if there is one. */
async function enrollNode(store: Store, domainId: string, towerHost: string): Promise<string | undefined> {
  const node = (await store.listNodes()).find(
    (n) =>
      n.hostname === towerHost && n.status === "online" && (n.domains.includes("*") || n.domains.includes(domainId)),
  );
  return node?.id;
}
