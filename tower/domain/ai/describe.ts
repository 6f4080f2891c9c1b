// A proposed action in words, for the people who approve it: "Submit task "Lint" to mission
// Release · shell: npm run lint". Ids become names where the store knows them; the tool's name and
// raw arguments stay in the action's `tool` and `arguments` for machines.
import type { Store } from "../../store/store.js";
import { summarizeToolCall } from "../tools/index.js";

type Args = Record<string, unknown>;

const clip = (s: string, n = 80) => {
  const t = s.replace(/\s+/g, " ").trim();
  return t.length > n ? `${t.slice(0, n - 1)}…` : t;
};
const q = (v: unknown) => `"${clip(String(v ?? ""))}"`;

/** The names an action's ids refer to (the id itself when the store has none). */
export interface NameLookup {
  domain(id: string): Promise<string>;
  mission(id: string): Promise<string>;
  task(id: string): Promise<string>;
  agent(id: string): Promise<string>;
}

export function storeNames(store: Pick<Store, "getDomain" | "getMission" | "getTask" | "getAgent">): NameLookup {
  const or = (id: string, name: string | undefined) => (name ? q(name) : id);
  return {
    domain: async (id) => or(id, (await store.getDomain(id))?.name),
    mission: async (id) => or(id, (await store.getMission(id))?.title),
    task: async (id) => or(id, (await store.getTask(id))?.title),
    agent: async (id) => or(id, (await store.getAgent(id))?.name),
  };
}

/** One sentence describing what approving `tool` with `args` would do. */
export async function describeAction(tool: string, args: Args, names: NameLookup): Promise<string> {
  const s = (k: string) => (typeof args[k] === "string" ? (args[k] as string) : "");
  switch (tool) {
    case "create_domain":
      return `Create domain ${q(s("name"))}`;
    case "create_mission":
      return `Create mission ${q(s("title"))} in domain ${await names.domain(s("domain_id"))}`;
    case "submit_mesh_task": {
      const input = (args.input ?? {}) as Args;
      const extra = [
        s("runtime") &&
          (typeof input.command === "string" ? `${s("runtime")}: ${clip(input.command, 60)}` : s("runtime")),
        typeof input.prompt === "string" && `prompt ${q(clip(input.prompt, 60))}`,
        typeof args.priority === "number" && args.priority !== 0 && `priority ${args.priority}`,
        s("claim_policy") === "broadcast" && "to every matching agent",
        s("assignee_agent_id") && `assigned to ${await names.agent(s("assignee_agent_id"))}`,
        Array.isArray(args.capabilities) && args.capabilities.length > 0 && `needs ${args.capabilities.join(", ")}`,
      ].filter(Boolean);
      return (
        `Submit task ${q(s("title"))} to mission ` +
        `${await names.mission(s("mission_id"))}${extra.length ? ` · ${extra.join(" · ")}` : ""}`
      );
    }
    case "retry_mesh_task":
      return `Retry task ${await names.task(s("task_id"))}`;
    case "cancel_task":
      return `Cancel task ${await names.task(s("task_id"))}`;
    case "claim_mesh_task":
      return `Claim the next task for agent ${await names.agent(s("agent_id"))}`;
    case "run_pipeline": {
      const steps = [...s("source").matchAll(/^\s*name\s*=\s*"([^"]*)"/gm)].map((m) => m[1]);
      // the file's first name = is the pipeline's own when it comes before the first [[step]]
      const named = /^\s*name\s*=/m.exec(s("source"));
      const firstStep = s("source").indexOf("[[step]]");
      const title = s("title") || (named && (firstStep < 0 || named.index < firstStep) ? steps.shift() : "");
      return (
        `Run pipeline ${q(title || "pipeline")} in domain ${await names.domain(s("domain_id"))}: ` +
        `${steps.length} step(s)${steps.length ? ` (${clip(steps.join(" → "), 120)})` : ""}`
      );
    }
    case "put_doc":
      return `Write document ${q(s("name"))} in mission ${await names.mission(s("mission_id"))}`;
    case "put_artifact":
      return `Attach ${q(s("name"))} to task ${await names.task(s("task_id"))}`;
    case "signal_agent":
      return `Tell agent ${await names.agent(s("agent_id"))}: ${q(s("prompt"))}`;
    case "restart_agent":
      return `Restart agent ${await names.agent(s("agent_id"))}`;
    case "pause_agent":
      return `Pause agent ${await names.agent(s("agent_id"))} (no auto-restart)`;
    case "resume_agent":
      return `Resume agent ${await names.agent(s("agent_id"))}`;
    default:
      return summarizeToolCall(tool, args);
  }
}
