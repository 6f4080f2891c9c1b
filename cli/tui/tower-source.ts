// The TUI's data from a real tower: generated Connect clients; live events from
// EventService.StreamEvents, resumed after the last id with the 1 s → 30 s backoff.
import {
  AgentStateSchema,
  DenialSourceSchema,
  RuntimeSchema,
  TaskStatus,
  TaskStatusSchema,
  MissionStatusSchema,
} from "../../gen/ep/tower/v1/resources_pb.js";
import { denialLines } from "../denials.js";
import type { JsonObject } from "@bufbuild/protobuf";
import { createBackoff } from "../../common/backoff.js";
import { agentOf, what } from "../event-line.js";
import { createClient, type Transport } from "@connectrpc/connect";
import { ActionStatus, ActionStatusSchema, AiService, type PendingAction } from "../../gen/ep/tower/v1/ai_pb.js";
import { EventService } from "../../gen/ep/tower/v1/events_pb.js";
import { AgentService } from "../../gen/ep/tower/v1/fleet_pb.js";
import { TaskWaitReasonSchema, WorkService } from "../../gen/ep/tower/v1/work_pb.js";
import type { Event, Task } from "../../gen/ep/tower/v1/resources_pb.js";
import {
  ApprovalService,
  ApprovalStatus,
  ApprovalStatusSchema,
  type Approval,
} from "../../gen/ep/tower/v1/approvals_pb.js";
import { enumWord, isoOf } from "../../common/vocab.js";
import type { ApprovalItem, EventItem, FrameItem, TaskDetail, TaskItem, TuiDataSource } from "./data-source.js";

export function frameOf(id: number, payload: JsonObject | undefined): FrameItem {
  const p = payload ?? {};
  return {
    id,
    kind: String(p.kind ?? "text"),
    text: String(p.text ?? ""),
    data:
      p.data && typeof p.data === "object" && !Array.isArray(p.data) ? (p.data as Record<string, unknown>) : undefined,
  };
}

type EventFields = Pick<Event, "type" | "name" | "status" | "payload" | "taskId" | "agentId">;
const eventFields = (e: EventFields) => ({
  type: e.type,
  name: e.name,
  status: e.status,
  payload: e.payload ?? {},
  task_id: e.taskId,
  agent_id: e.agentId,
});

/** An event in words, as `ep events tail` prints it (cli/event-line.ts), agents by name. */
export function eventDetail(e: EventFields, nameOf?: (id: string) => string | undefined): string {
  return what(eventFields(e), nameOf);
}

function eventItem(e: Event, nameOf: (id: string) => string | undefined): EventItem {
  return {
    id: Number(e.id),
    type: e.type,
    name: e.name,
    status: e.status,
    detail: eventDetail(e, nameOf),
    at: isoOf(e.createdAt),
    taskId: e.taskId || undefined,
    frame: e.type === "progress" ? frameOf(Number(e.id), e.payload as JsonObject | undefined) : undefined,
  };
}

export function createTowerSource(transport: Transport, label: string): TuiDataSource {
  const work = createClient(WorkService, transport);
  const agents = createClient(AgentService, transport);
  const ai = createClient(AiService, transport);
  const events = createClient(EventService, transport);
  let sessionId: string | undefined;
  const stops = new Set<() => void>();
  const toItem = (a: PendingAction, session = ""): ApprovalItem => ({
    sessionId: a.sessionId,
    id: a.id,
    tool: a.tool,
    summary: a.summary,
    status: enumWord(ActionStatusSchema, a.status),
    session,
    error: a.error,
  });
  // agent names, refreshed with each agents() call (tasks show who runs them)
  let agentNames = new Map<string, string>();
  const askedFor = new Set<string>();
  const loadAgents = async () => {
    const list = (await agents.listAgents({})).agents;
    agentNames = new Map(list.filter((a) => a.name).map((a) => [a.id, a.name]));
    return list;
  };
  const taskItem = (t: Task): TaskItem => {
    const who = t.claimedBy || t.assigneeAgentId;
    return {
      id: t.id,
      missionId: t.missionId,
      title: t.title,
      status: enumWord(TaskStatusSchema, t.status),
      runtime: enumWord(RuntimeSchema, t.runtime),
      agent: who ? (agentNames.get(who) ?? who) : "",
    };
  };
  const taskDetail = (t: Task): TaskDetail => {
    const u = t.result?.usage;
    const usage =
      u && (u.inputTokens || u.outputTokens || u.costUsd)
        ? `${u.inputTokens} tokens in, ${u.outputTokens} ` +
          `out${u.costUsd ? `, $${u.costUsd.toFixed(4)}` : ""}${u.model ? ` (${u.model})` : ""}`
        : "";
    const denials = t.result?.denials.length
      ? denialLines(t.result.denials.map((d) => ({ ...d, source: enumWord(DenialSourceSchema, d.source) })))
      : undefined;
    return {
      ...taskItem(t),
      attempts: t.attempts,
      maxAttempts: t.maxAttempts,
      createdAt: isoOf(t.createdAt),
      output: t.result?.output ?? "",
      error: t.result?.error ?? "",
      usage,
      workspace: workspaceOf(t.result?.workspace),
      ...(denials ? { denials } : {}),
    };
  };

  return {
    label,
    async missions() {
      const out = [];
      for (const d of (await work.listDomains({})).domains) {
        for (const m of (await work.listMissions({ domainId: d.id })).missions)
          out.push({
            id: m.id,
            domainId: m.domainId,
            domainName: d.name || d.id,
            title: m.title,
            status: enumWord(MissionStatusSchema, m.status),
          });
      }
      return out;
    },
    async agents() {
      const list = await loadAgents();
      const running = new Map<string, string>();
      for (const t of (await work.listTasks({ status: TaskStatus.RUNNING, limit: 500 })).tasks)
        if (t.claimedBy) running.set(t.claimedBy, t.title);
      return list.map((a) => ({
        id: a.id,
        name: a.name,
        domainId: a.domainId,
        runtime: enumWord(RuntimeSchema, a.runtime),
        state: enumWord(AgentStateSchema, a.state),
        taskTitle: running.get(a.id),
      }));
    },
    ...approvalsPart(transport, toItem),
    async tasks(missionId) {
      if (!agentNames.size) await loadAgents().catch(() => undefined); // names are a nicety: ids show instead
      const tasks = (await work.listTasks({ missionId, limit: 500 })).tasks.filter((t) => !t.parentTaskId);
      const names = new Map(tasks.map((t) => [t.id, t.step || t.title]));
      return tasks.map((t) => ({
        ...taskItem(t),
        ...(t.waitingOn.length ? { waitingOn: t.waitingOn.map((id) => names.get(id) ?? id) } : {}),
      }));
    },
    async task(taskId) {
      const got = await work.getTask({ taskId });
      const detail = taskDetail(got.task!);
      return got.wait
        ? { ...detail, wait: `${enumWord(TaskWaitReasonSchema, got.wait.reason)}: ${got.wait.message}` }
        : detail;
    },
    async frames(taskId) {
      const out: FrameItem[] = [];
      for (let after = 0n; ; ) {
        const page = await events.listEvents({ afterId: after, limit: 500, filter: { taskId, types: ["progress"] } });
        out.push(...page.events.map((e) => frameOf(Number(e.id), e.payload as JsonObject | undefined)));
        if (page.events.length < 500) return out;
        after = page.events[page.events.length - 1].id;
      }
    },
    async cancelTask(taskId) {
      return taskDetail((await work.cancelTask({ taskId, reason: "cancelled from ep console" })).task!);
    },
    async retryTask(taskId) {
      return taskDetail((await work.retryTask({ taskId })).task!);
    },
    subscribe(onEvent, onError) {
      const ctl = new AbortController();
      let after = 0n; // 0: start at the newest event
      const backoff = createBackoff({ jitter: 0 });
      void (async () => {
        while (!ctl.signal.aborted) {
          try {
            for await (const res of events.streamEvents({ afterId: after }, { signal: ctl.signal })) {
              backoff.reset();
              if (!res.event) continue;
              after = res.event.id;
              // an agent enrolled since the names were read: read them again, once per agent
              const agent = agentOf(eventFields(res.event));
              if (agent?.startsWith("agt_") && !agentNames.has(agent) && !askedFor.has(agent)) {
                askedFor.add(agent);
                await loadAgents().catch(() => undefined); // the line shows the id instead
              }
              onEvent(eventItem(res.event, (id) => agentNames.get(id)));
            }
          } catch (err) {
            if (ctl.signal.aborted) return;
            onError(err as Error);
          }
          await new Promise((r) => setTimeout(r, backoff.next()));
        }
      })();
      const stop = () => ctl.abort();
      stops.add(stop);
      return () => {
        stops.delete(stop);
        stop();
      };
    },
    async chat(content) {
      if (!sessionId) sessionId = (await ai.createSession({ title: "" })).session!.id;
      const res = await ai.submitTurn({ sessionId, content });
      const reply = res.reply;
      const parts = [reply?.content ?? ""];
      if (reply?.error) parts.push(`error: ${reply.error}`);
      return {
        sessionId,
        text: parts.filter(Boolean).join("\n"),
        actions: res.actions.map((a) => toItem(a)),
        viewSpecs: reply?.viewSpecs ?? [],
      };
    },

    close() {
      for (const s of stops) s();
    },
  };
}

/** The workspace change as the TUI shows it: the branch line and the stat. */
function workspaceOf(
  w:
    | { branch: string; base: string; head: string; stat: string; worktree: string; commits: { byEpd: boolean }[] }
    | undefined,
): TaskDetail["workspace"] {
  if (!w) return undefined;
  const byEpd = w.commits.filter((c) => c.byEpd).length;
  const made = w.commits.length ? `: ${w.commits.length - byEpd} by the agent${byEpd ? `, ${byEpd} by epd` : ""}` : "";
  const commits =
    w.head && w.head !== w.base
      ? `${w.base.slice(0, 8)}..${w.head.slice(0, 8)}${made}`
      : `from ${w.base.slice(0, 8)}, no commits`;
  return {
    branch: `branch ${w.branch} (${commits})${w.worktree ? ` · kept at ${w.worktree}` : ""}`,
    stat: w.stat || "no changes",
  };
}

/**
 * What waits for a person: agents' tool-permission requests (ApprovalService; no session, ids
 * apr_…) first, then the pending actions of AI sessions; decided by whichever service owns them.
 */
function approvalsPart(
  transport: Transport,
  toItem: (a: PendingAction, session?: string) => ApprovalItem,
): Pick<TuiDataSource, "approvals" | "approve" | "reject"> {
  const ai = createClient(AiService, transport);
  const asks = createClient(ApprovalService, transport);
  const askItem = (a: Approval): ApprovalItem => ({
    sessionId: "",
    id: a.id,
    tool: a.tool,
    summary: `${a.title || a.tool} (task ${a.taskId})`,
    status: enumWord(ApprovalStatusSchema, a.status),
  });
  return {
    async approvals() {
      const out: ApprovalItem[] = (await asks.listApprovals({ status: ApprovalStatus.PENDING })).approvals.map(askItem);
      let sessions;
      try {
        sessions = (await ai.listSessions({})).sessions;
      } catch {
        return out; // a tower without the AI console has no actions to approve
      }
      for (const s of sessions)
        for (const a of (await ai.getSession({ sessionId: s.id })).actions)
          if (a.status === ActionStatus.PENDING) out.push(toItem(a, s.title));
      return out;
    },
    async approve(s, a) {
      if (!s) return askItem((await asks.approve({ approvalId: a })).approval!);
      return toItem((await ai.approveAction({ sessionId: s, actionId: a })).action!);
    },
    async reject(s, a) {
      if (!s) return askItem((await asks.reject({ approvalId: a })).approval!);
      return toItem((await ai.rejectAction({ sessionId: s, actionId: a })).action!);
    },
  };
}
