// What a planner may look up while it plans a turn: domains, missions, tasks and agents by id or
// by a name that is unique (case-insensitive), the session's pending actions, a short snapshot of
// the tower for model planners, and the central runtime default.
import type { Store } from "../../store/store.js";
import type { PlannerContext } from "./planner.js";

export function storePlannerContext(
  store: Store,
  sessionId: string,
  defaultRuntime: string | undefined,
): PlannerContext {
  const same = (a: string, b: string) => a.trim().toLowerCase() === b.trim().toLowerCase();
  const unique = <T>(rows: T[]): T | undefined => (rows.length === 1 ? rows[0] : undefined);
  return {
    async findDomain(ref) {
      const byId = await store.getDomain(ref);
      if (byId) return { id: byId.id, name: byId.name };
      const d = unique((await store.listDomains()).filter((x) => same(x.name, ref)));
      return d && { id: d.id, name: d.name };
    },
    async findMission(ref, domainId) {
      const byId = await store.getMission(ref);
      if (byId) return { id: byId.id, title: byId.title, domain_id: byId.domainId };
      const m = unique((await store.listMissions(domainId)).filter((x) => same(x.title, ref)));
      return m && { id: m.id, title: m.title, domain_id: m.domainId };
    },
    async findTask(ref, missionId) {
      const byId = await store.getTask(ref);
      if (byId) return { id: byId.id, title: byId.title, mission_id: byId.missionId, status: byId.status };
      const t = unique(
        (await store.listTasks({ missionId, limit: 5000 })).filter((x) => same(x.title, ref) && !x.parentTaskId),
      );
      return t && { id: t.id, title: t.title, mission_id: t.missionId, status: t.status };
    },
    async findAgent(ref) {
      const byId = await store.getAgent(ref);
      if (byId) return { id: byId.id, name: byId.name, domain_id: byId.domainId, state: byId.state };
      const a = unique((await store.listAgents({})).filter((x) => x.name !== "" && same(x.name, ref)));
      return a && { id: a.id, name: a.name, domain_id: a.domainId, state: a.state };
    },
    async listPendingActionIds() {
      return (await store.listAiActions({ sessionId, status: "pending" })).map((a) => a.id);
    },
    async defaultDomain() {
      const all = await store.listDomains();
      return all.length === 1 ? { id: all[0].id, name: all[0].name } : undefined;
    },
    async snapshot() {
      const [domains, missions, agents] = await Promise.all([
        store.listDomains(),
        store.listMissions(),
        store.listAgents({}),
      ]);
      const lines = [
        `domains: ${
          domains
            .slice(0, 50)
            .map((d) => `${d.name} (${d.id})`)
            .join(", ") || "none"
        }`,
        `missions: ${
          missions
            .slice(0, 50)
            .map((m) => `${m.title} (${m.id}, domain ${m.domainId})`)
            .join(", ") || "none"
        }`,
        `agents: ${
          agents
            .slice(0, 50)
            .map((a) => `${a.name || a.id} (${a.id}, ${a.runtime}, ${a.state})`)
            .join(", ") || "none"
        }`,
      ];
      return lines.join("\n");
    },
    defaultRuntime,
  };
}
