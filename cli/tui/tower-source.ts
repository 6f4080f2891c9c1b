// The TUI's data from a real tower: generated Connect clients; live events from
// EventService.StreamEvents, resumed after the last id with the 1 s → 30 s backoff.
import { createClient, type Transport } from "@connectrpc/connect";
import { AiService } from "../../gen/ep/tower/v1/ai_pb.js";
import { EventService } from "../../gen/ep/tower/v1/events_pb.js";
import { AgentService } from "../../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../../gen/ep/tower/v1/work_pb.js";
import type { Event } from "../../gen/ep/tower/v1/resources_pb.js";
import type { ApprovalItem, EventItem, TuiDataSource } from "./data-source.js";

function eventItem(e: Event): EventItem {
  const ids = [e.domainId && `domain=${e.domainId}`, e.missionId && `mission=${e.missionId}`, e.taskId && `task=${e.taskId}`, e.agentId && `agent=${e.agentId}`].filter(Boolean).join(" ");
  const payload = e.payload ? JSON.stringify(e.payload) : "";
  return { id: Number(e.id), type: e.type, name: e.name, status: e.status, detail: [ids, payload === "{}" ? "" : payload].filter(Boolean).join(" ") };
}

export function createTowerSource(transport: Transport, label: string): TuiDataSource {
  const work = createClient(WorkService, transport);
  const agents = createClient(AgentService, transport);
  const ai = createClient(AiService, transport);
  const events = createClient(EventService, transport);
  let sessionId: string | undefined;
  const stops = new Set<() => void>();
  const toItem = (a: { sessionId: string; id: string; tool: string; summary: string; status: string }): ApprovalItem => ({ sessionId: a.sessionId, id: a.id, tool: a.tool, summary: a.summary, status: a.status });

  return {
    label,
    async missions() {
      const out = [];
      for (const d of (await work.listDomains({})).domains) out.push(...(await work.listMissions({ domainId: d.id })).missions);
      return out.map((m) => ({ id: m.id, domainId: m.domainId, title: m.title, status: m.status }));
    },
    async agents() {
      return (await agents.listAgents({})).agents.map((a) => ({ id: a.id, name: a.name, domainId: a.domainId, runtime: a.runtime, state: a.state }));
    },
    async approvals() {
      const out: ApprovalItem[] = [];
      let sessions;
      try {
        sessions = (await ai.listSessions({})).sessions;
      } catch {
        return out; // a tower without the AI console has nothing to approve
      }
      for (const s of sessions) for (const a of (await ai.getSession({ sessionId: s.id })).actions) if (a.status === "pending") out.push(toItem(a));
      return out;
    },
    subscribe(onEvent, onError) {
      const ctl = new AbortController();
      let after = 0n; // 0: start at the newest event
      let delay = 1000;
      void (async () => {
        while (!ctl.signal.aborted) {
          try {
            for await (const res of events.streamEvents({ afterId: after }, { signal: ctl.signal })) {
              delay = 1000;
              if (!res.event) continue;
              after = res.event.id;
              onEvent(eventItem(res.event));
            }
          } catch (err) {
            if (ctl.signal.aborted) return;
            onError(err as Error);
          }
          await new Promise((r) => setTimeout(r, delay));
          delay = Math.min(delay * 2, 30_000);
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
      if (!sessionId) sessionId = (await ai.createSession({ title: "ep console" })).session!.id;
      const res = await ai.submitTurn({ sessionId, content });
      const reply = res.reply;
      const parts = [reply?.content ?? ""];
      if (reply?.error) parts.push(`error: ${reply.error}`);
      return { sessionId, text: parts.filter(Boolean).join("\n"), actions: res.actions.map(toItem) };
    },
    async approve(s, a) {
      return toItem((await ai.approveAction({ sessionId: s, actionId: a })).action!);
    },
    async reject(s, a) {
      return toItem((await ai.rejectAction({ sessionId: s, actionId: a })).action!);
    },
    close() {
      for (const s of stops) s();
    },
  };
}
