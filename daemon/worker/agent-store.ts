// The agents enrolled on this node, persisted in $EP_HOME/epd/agents.json so a restarted
// daemon keeps claiming for them. The tower is the source of truth for their state.
import { join } from "node:path";
import { createJsonFileWriter, readJsonFile } from "./json-file.js";

export interface LocalAgentRecord {
  id: string;
  domainId: string;
  name: string;
  runtime: string;
  capabilities: string[];
  enrolledAt: string;
  /** Set for a profile agent of agents.toml (its profile id); such records live in the fleet, not in agents.json. */
  profile?: string;
}

export interface AgentStore {
  readonly path: string;
  load(): Promise<void>;
  list(): LocalAgentRecord[];
  /** By agent id, or by name when no id matches. */
  find(idOrName: string): LocalAgentRecord | undefined;
  add(agent: LocalAgentRecord): Promise<void>;
  /**
   * An enrollment under way (agent.enroll: the tower's answer, then add()). The tower may hand
   * the new agent its first task before its answer is read here; enrolled() lets that task wait
   * for it instead of looking the agent up at the tower (GetAgent).
   */
  enrolling<T>(p: Promise<T>): Promise<T>;
  /** Settles once every enrollment under way when called has ended (recorded or failed). */
  enrolled(): Promise<void>;
}

export function createAgentStore(daemonHome: string): AgentStore {
  const path = join(daemonHome, "agents.json");
  let agents: LocalAgentRecord[] = [];
  const underWay = new Set<Promise<unknown>>();
  const writer = createJsonFileWriter(path, () => ({ version: 1, agents }));
  return {
    path,
    async load() {
      const doc = await readJsonFile<{ agents?: LocalAgentRecord[] }>(path, {});
      agents = Array.isArray(doc.agents)
        ? doc.agents.filter((a) => a && typeof a.id === "string" && typeof a.domainId === "string")
        : [];
    },
    list: () => [...agents],
    find: (idOrName) =>
      agents.find((a) => a.id === idOrName) ?? agents.find((a) => a.name !== "" && a.name === idOrName),
    async add(agent) {
      agents = [...agents.filter((a) => a.id !== agent.id), agent];
      await writer.save();
    },
    enrolling(p) {
      const done = (): void => void underWay.delete(settled);
      const settled: Promise<void> = p.then(done, done);
      underWay.add(settled);
      return p;
    },
    enrolled: () => Promise.all([...underWay]).then(() => undefined),
  };
}
