import { describe, expect, it } from "vitest";
import { describeAction, type NameLookup } from "./describe.js";

const names: NameLookup = {
  domain: async (id) => (id === "dom_1" ? '"acme"' : id),
  mission: async (id) => (id === "msn_1" ? '"Release"' : id),
  task: async (id) => (id === "tsk_1" ? '"Run tests"' : id),
  agent: async (id) => (id === "agt_1" ? '"builder"' : id),
};

describe("a proposed action in words", () => {
  it("names what it acts on instead of ids, and says what it would do", async () => {
    expect(await describeAction("create_domain", { name: "acme" }, names)).toBe('Create domain "acme"');
    expect(await describeAction("create_mission", { domain_id: "dom_1", title: "Q4" }, names)).toBe(
      'Create mission "Q4" in domain "acme"',
    );
    expect(
      await describeAction(
        "submit_mesh_task",
        { mission_id: "msn_1", title: "Lint", runtime: "shell", input: { command: "npm run lint" }, priority: 5 },
        names,
      ),
    ).toBe('Submit task "Lint" to mission "Release" · shell: npm run lint · priority 5');
    expect(
      await describeAction(
        "submit_mesh_task",
        { mission_id: "msn_1", title: "Fix", claim_policy: "assigned", assignee_agent_id: "agt_1" },
        names,
      ),
    ).toBe('Submit task "Fix" to mission "Release" · assigned to "builder"');
    expect(await describeAction("retry_mesh_task", { task_id: "tsk_1" }, names)).toBe('Retry task "Run tests"');
    expect(await describeAction("signal_agent", { agent_id: "agt_1", prompt: "stop\nnow" }, names)).toBe(
      'Tell agent "builder": "stop now"',
    );
    expect(await describeAction("pause_agent", { agent_id: "agt_unknown" }, names)).toBe(
      "Pause agent agt_unknown (no auto-restart)",
    );
  });

  it("falls back to the tool and its arguments for a tool it has no words for", async () => {
    expect(await describeAction("future_tool", { x: "1" }, names)).toBe("future_tool x=1");
  });
});
