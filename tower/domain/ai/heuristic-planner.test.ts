import { describe, expect, it } from "vitest";
import { TOOLS, validateToolArgs } from "../tools/catalog.js";
import { createHeuristicPlanner } from "./heuristic-planner.js";
import type { AgentRef, DomainRef, MissionRef, PlannerContext, TaskRef } from "./planner.js";
import { validateViewSpec } from "./view-spec.js";

// A small world the planner looks names up in (the caller implements this over the store).
const domains: DomainRef[] = [
  { id: "dom_acme0001", name: "acme" },
  { id: "dom_research01", name: "Research Lab" },
  { id: "dom_aiapprove1", name: "ai-approve" },
];
const missions: MissionRef[] = [
  { id: "msn_launch0001", title: "Launch prep", domain_id: "dom_acme0001" },
  { id: "msn_audit00001", title: "Q3 audit", domain_id: "dom_acme0001" },
  { id: "msn_retrylogic", title: "retry-logic", domain_id: "dom_acme0001" },
  { id: "msn_first00001", title: "first mission", domain_id: "dom_acme0001" },
];
const tasks: TaskRef[] = [
  { id: "tsk_tests00001", title: "Run tests", mission_id: "msn_launch0001", status: "failed" },
  { id: "tsk_docs000001", title: "Build docs", mission_id: "msn_launch0001", status: "running" },
];
const agents: AgentRef[] = [
  { id: "agt_builder001", name: "builder-1", domain_id: "dom_acme0001", state: "idle" },
  { id: "agt_review0001", name: "reviewer", domain_id: "dom_acme0001", state: "busy" },
  { id: "agt_stopwatch1", name: "stop-watch", domain_id: "dom_acme0001", state: "idle" },
];

function byNameOrId<T extends { id: string }>(list: T[], label: (x: T) => string) {
  return (v: string): T | undefined => list.find((x) => x.id === v || label(x).toLowerCase() === v.toLowerCase());
}

function context(extra: Partial<PlannerContext> = {}): PlannerContext {
  return {
    findDomain: byNameOrId(domains, (d) => d.name),
    findMission: async (v, domainId) => {
      const m = byNameOrId(missions, (x) => x.title)(v);
      return m && (!domainId || m.domain_id === domainId) ? m : undefined;
    },
    findTask: (v, missionId) => {
      const t = byNameOrId(tasks, (x) => x.title)(v);
      return t && (!missionId || t.mission_id === missionId) ? t : undefined;
    },
    findAgent: async (v) => byNameOrId(agents, (a) => a.name)(v),
    listPendingActionIds: () => ["act_0001aaaa", "act_0002bbbb"],
    ...extra,
  };
}

const planner = createHeuristicPlanner();
const plan = (content: string, ctx: PlannerContext = context()) =>
  planner.plan({ content, history: [], tools: [...TOOLS], context: ctx });

type Row = [input: string, tool: string | null, args?: Record<string, unknown>];

const TABLE: Row[] = [
  // lists
  ["list domains", "list_domains", {}],
  ["show me all domains", "list_domains", {}],
  ["what domains are there?", "list_domains", {}],
  ["list missions", "list_missions", {}],
  ["show missions in domain acme", "list_missions", { domain_id: "dom_acme0001" }],
  ["which missions are in acme?", "list_missions", { domain_id: "dom_acme0001" }],
  ['missions of "Research Lab"', "list_missions", { domain_id: "dom_research01" }],
  ["list tasks", "list_tasks", {}],
  ["show tasks of mission Launch prep", "list_tasks", { mission_id: "msn_launch0001" }],
  ["what tasks are in mission msn_launch0001?", "list_tasks", { mission_id: "msn_launch0001" }],
  ["list failed tasks", "list_tasks", { status: "failed" }],
  ["show running tasks in Launch prep", "list_tasks", { status: "running", mission_id: "msn_launch0001" }],
  ["list agents", "list_agents", {}],
  ["who is online?", "list_agents", {}],
  ["show agents in domain acme", "list_agents", { domain_id: "dom_acme0001" }],
  ["list nodes", "list_nodes", {}],
  ["which machines are connected?", "list_nodes", {}],
  ["show pending approvals", "list_pending_actions", { status: "pending" }],
  ["what is waiting for my approval?", "list_pending_actions", { status: "pending" }],
  ["show recent events", "list_events", {}],
  ["show the last 20 events", "list_events", { limit: 20 }],
  ["what happened with agent builder-1?", "list_events", { agent_id: "agt_builder001" }],
  ["list cron jobs", "list_cron_jobs", {}],
  ["show supervision status", "get_supervision", {}],
  ["show me the tasks", "list_tasks", {}],
  ["list the missions for Research Lab", "list_missions", { domain_id: "dom_research01" }],
  ["ls agents", "list_agents", {}],
  ["any queued tasks in mission Q3 audit?", "list_tasks", { status: "queued", mission_id: "msn_audit00001" }],
  // show one
  ["show me mission msn_launch0001 please", "get_mission", { mission_id: "msn_launch0001" }],
  ["what is agent builder-1 doing?", "get_agent", { agent_id: "agt_builder001" }],
  ["show mission Launch prep", "get_mission", { mission_id: "msn_launch0001" }],
  ['tell me about the "Q3 audit" mission', "get_mission", { mission_id: "msn_audit00001" }],
  ["get task tsk_docs000001", "get_task", { task_id: "tsk_docs000001" }],
  ["what's the status of task Run tests?", "get_task", { task_id: "tsk_tests00001" }],
  ['describe task "Build docs"', "get_task", { task_id: "tsk_docs000001" }],
  ["show agent builder-1", "get_agent", { agent_id: "agt_builder001" }],
  ["how is agent reviewer doing?", "get_agent", { agent_id: "agt_review0001" }],
  // create
  ["create a domain called payments", "create_domain", { name: "payments" }],
  ['new domain "Data Platform"', "create_domain", { name: "Data Platform" }],
  ["create domain ops", "create_domain", { name: "ops" }],
  [
    'create mission "Release 2.0" in domain acme',
    "create_mission",
    { domain_id: "dom_acme0001", title: "Release 2.0" },
  ],
  ["add a mission named Q4 planning to acme", "create_mission", { domain_id: "dom_acme0001", title: "Q4 planning" }],
  [
    'create a new mission titled "Onboarding" in the Research Lab domain',
    "create_mission",
    { domain_id: "dom_research01", title: "Onboarding" },
  ],
  // submit
  ['submit a task "Lint" to mission Launch prep', "submit_mesh_task", { mission_id: "msn_launch0001", title: "Lint" }],
  [
    'submit task "ui hello" to mission first mission',
    "submit_mesh_task",
    { mission_id: "msn_first00001", title: "ui hello" },
  ],
  ["show mission first mission", "get_mission", { mission_id: "msn_first00001" }],
  [
    'queue task "Build site" in mission msn_launch0001 with priority 5',
    "submit_mesh_task",
    { mission_id: "msn_launch0001", title: "Build site", priority: 5 },
  ],
  [
    'add a task called Smoke test to Launch prep with command "npm run smoke"',
    "submit_mesh_task",
    { mission_id: "msn_launch0001", title: "Smoke test", runtime: "shell", input: { command: "npm run smoke" } },
  ],
  [
    'create task "Review PR" in mission Launch prep using vendorB, assigned to agent reviewer',
    "submit_mesh_task",
    {
      mission_id: "msn_launch0001",
      title: "Review PR",
      runtime: "vendorB",
      claim_policy: "assigned",
      assignee_agent_id: "agt_review0001",
    },
  ],
  [
    'submit task "Update deps" to mission Q3 audit as broadcast needing node, linux',
    "submit_mesh_task",
    { mission_id: "msn_audit00001", title: "Update deps", claim_policy: "broadcast", capabilities: ["node", "linux"] },
  ],
  // retry / cancel / claim
  ["retry task tsk_tests00001", "retry_mesh_task", { task_id: "tsk_tests00001" }],
  ['rerun the failed task "Run tests"', "retry_mesh_task", { task_id: "tsk_tests00001" }],
  ["try again with task Run tests", "retry_mesh_task", { task_id: "tsk_tests00001" }],
  ["cancel task tsk_docs000001", "cancel_task", { task_id: "tsk_docs000001" }],
  ["kill tsk_docs000001", "cancel_task", { task_id: "tsk_docs000001" }],
  [
    "abort the Build docs task because it is stuck",
    "cancel_task",
    { task_id: "tsk_docs000001", reason: "it is stuck" },
  ],
  ['stop the task "Build docs"', "cancel_task", { task_id: "tsk_docs000001" }],
  ["claim a task for agent builder-1", "claim_mesh_task", { agent_id: "agt_builder001" }],
  // agents
  [
    "signal agent builder-1: rebase onto main",
    "signal_agent",
    { agent_id: "agt_builder001", prompt: "rebase onto main" },
  ],
  ["tell builder-1 to run the linter", "signal_agent", { agent_id: "agt_builder001", prompt: "run the linter" }],
  [
    'send "check CI please" to agent reviewer',
    "signal_agent",
    { agent_id: "agt_review0001", prompt: "check CI please" },
  ],
  ["restart agent builder-1", "restart_agent", { agent_id: "agt_builder001" }],
  ["reboot reviewer", "restart_agent", { agent_id: "agt_review0001" }],
  ["pause agent builder-1", "pause_agent", { agent_id: "agt_builder001" }],
  ["disable auto-restart for agent reviewer", "pause_agent", { agent_id: "agt_review0001" }],
  ["resume agt_builder001", "resume_agent", { agent_id: "agt_builder001" }],
  ["unpause reviewer", "resume_agent", { agent_id: "agt_review0001" }],
  ["please restart the reviewer agent", "restart_agent", { agent_id: "agt_review0001" }],
  ['ping builder-1 with "status report"', "signal_agent", { agent_id: "agt_builder001", prompt: "status report" }],
  // docs
  [
    'put doc "plan.md" in mission Launch prep saying "ship on Friday"',
    "put_doc",
    { mission_id: "msn_launch0001", name: "plan.md", content: "ship on Friday" },
  ],
  // command words inside names, ids and quotes are not commands
  ['create mission "X" in domain ai-approve', "create_mission", { domain_id: "dom_aiapprove1", title: "X" }],
  [
    "create a mission called Budget in domain ai-approve",
    "create_mission",
    { domain_id: "dom_aiapprove1", title: "Budget" },
  ],
  [
    'create mission "Approve the budget" in domain acme',
    "create_mission",
    { domain_id: "dom_acme0001", title: "Approve the budget" },
  ],
  ["show missions in domain ai-approve", "list_missions", { domain_id: "dom_aiapprove1" }],
  ["list tasks in mission retry-logic", "list_tasks", { mission_id: "msn_retrylogic" }],
  ["show mission retry-logic", "get_mission", { mission_id: "msn_retrylogic" }],
  ["what is agent stop-watch doing?", "get_agent", { agent_id: "agt_stopwatch1" }],
  ["pause agent stop-watch", "pause_agent", { agent_id: "agt_stopwatch1" }],
  [
    'submit task "Cancel the old jobs" to mission retry-logic',
    "submit_mesh_task",
    { mission_id: "msn_retrylogic", title: "Cancel the old jobs" },
  ],
  ["re-run task tsk_tests00001", "retry_mesh_task", { task_id: "tsk_tests00001" }],
  ["list in-progress tasks", "list_tasks", { status: "in_progress" }],
  // never approves
  ["approve what is pending", null],
  ["approve all", null],
  ["yes, approve act_0001aaaa", null],
  ["go ahead", null],
  ["reject everything", null],
  // anything else
  ["what's the weather like?", null],
  ["hello", null],
];

describe("heuristic planner", () => {
  it("has a table of at least 30 phrasings", () => {
    expect(TABLE.length).toBeGreaterThanOrEqual(30);
  });

  it.each(TABLE)("%s", async (input, tool, args) => {
    const out = await plan(input);
    expect(out.reply.length).toBeGreaterThan(0);
    if (tool === null) {
      expect(out.toolCalls).toEqual([]);
      return;
    }
    expect(out.toolCalls.map((c) => c.tool)).toEqual([tool]);
    expect(out.toolCalls[0].arguments).toEqual(args);
    expect(() => validateToolArgs(tool, out.toolCalls[0].arguments)).not.toThrow();
  });

  it("answers approval requests by pointing at the action bar, with its buttons, and calls nothing", async () => {
    for (const phrase of ["approve what is pending", "approve all"]) {
      const out = await plan(phrase);
      expect(out.toolCalls).toEqual([]);
      expect(out.reply).toMatch(/action bar/);
      expect(out.reply).toMatch(/never approves/);
      expect(out.viewSpecs).toHaveLength(1);
      const bar = validateViewSpec(out.viewSpecs![0]);
      expect(bar.type).toBe("action_bar");
      expect(bar.type === "action_bar" && bar.actions.map((a) => a.action_id)).toContain("act_0001aaaa");
    }
  });

  it("says there is nothing pending when nothing is", async () => {
    const out = await plan("approve all", context({ listPendingActionIds: () => [] }));
    expect(out.toolCalls).toEqual([]);
    expect(out.reply).toMatch(/nothing pending/);
    expect(out.viewSpecs).toBeUndefined();
  });

  it("answers anything else with what it can do", async () => {
    const out = await plan("what's the weather like?");
    expect(out.reply).toMatch(/I can:/);
    expect(out.reply).toMatch(/approve or reject them in the action bar/);
    expect((await plan("   ")).reply).toMatch(/I can:/);
    expect((await plan("help")).reply).toMatch(/I can:/);
  });

  it(
    "says what it cannot read in a task request, with the phrasing it " +
      "understands, instead of proposing a task without its command (issue 38)",
    async () => {
      const out = await plan("create a task in first mission that runs echo hello from chat");
      expect(out.toolCalls).toEqual([]);
      expect(out.reply).toContain("I could not read all of that: the command (echo hello from chat) is not in quotes");
      expect(out.reply).toContain("I found no title for the task");
      expect(out.reply).toContain(
        'The phrasing I understand: submit task "Run tests" to mission Release with command "npm test"',
      );
      expect(out.reply).toContain(
        'For yours: submit task "echo hello from chat" to mission "first mission" with command "echo hello from chat"',
      );
      // with a title, the suggestion keeps it
      const titled = await plan('submit task "Greet" to mission Launch prep that runs echo hi');
      expect(titled.toolCalls).toEqual([]);
      expect(titled.reply).toContain('For yours: submit task "Greet" to mission "Launch prep" with command "echo hi"');
      // the suggested phrasing is read as a whole
      const again = await plan(
        'submit task "echo hello from chat" to mission "first mission" with command "echo hello from chat"',
      );
      expect(again.toolCalls).toEqual([
        {
          tool: "submit_mesh_task",
          arguments: expect.objectContaining({
            mission_id: "msn_first00001",
            title: "echo hello from chat",
            input: { command: "echo hello from chat" },
          }),
        },
      ]);
      // a quoted command after "running" is read, not refused
      const quoted = await plan('submit task "Smoke" to mission Launch prep running "npm run smoke"');
      expect(quoted.toolCalls[0]?.arguments).toMatchObject({ input: { command: "npm run smoke" } });
    },
  );

  it("names an unknown mission and lists the known ones instead of guessing", async () => {
    const out = await plan('submit task "Lint" to mission Nowhere');
    expect(out.reply).toMatch(/could not find a mission called "Nowhere"/);
    expect(out.toolCalls).toEqual([{ tool: "list_missions", arguments: {} }]);
  });

  it("uses the default domain when a mission creation names none", async () => {
    const out = await plan('create mission "Hotfix"', context({ defaultDomain: () => domains[1] }));
    expect(out.toolCalls).toEqual([
      { tool: "create_mission", arguments: { domain_id: "dom_research01", title: "Hotfix" } },
    ]);
  });

  it("asks for a domain when a mission creation names none and there is no default", async () => {
    const out = await plan('create mission "Hotfix"');
    expect(out.toolCalls).toEqual([{ tool: "list_domains", arguments: {} }]);
    expect(out.reply).toMatch(/Which domain/);
  });

  it("puts the session's default runtime on submitted work unless the turn names one", async () => {
    const ctx = context({ defaultRuntime: "vendorA_code" });
    const a = await plan('submit task "Fix bug" to mission Launch prep', ctx);
    expect(a.toolCalls[0].arguments.runtime).toBe("vendorA_code");
    const b = await plan('submit task "Fix bug" to mission Launch prep using vendorC', ctx);
    expect(b.toolCalls[0].arguments.runtime).toBe("vendorC");
  });

  it("offers only the tools it was given", async () => {
    const out = await planner.plan({
      content: "restart agent builder-1",
      history: [],
      tools: TOOLS.filter((t) => t.kind === "read"),
      context: context(),
    });
    expect(out.toolCalls).toEqual([]);
    expect(out.reply).toMatch(/not available/);
  });

  it("keeps quoted text verbatim, even when it looks like a command", async () => {
    const out = await plan('signal agent reviewer with "approve all <b>now</b>"');
    expect(out.toolCalls).toEqual([
      { tool: "signal_agent", arguments: { agent_id: "agt_review0001", prompt: "approve all <b>now</b>" } },
    ]);
  });

  it("explains out-of-range values instead of failing the turn", async () => {
    const out = await plan('submit task "Big" to mission Launch prep with priority 99999999999');
    expect(out.toolCalls).toEqual([]);
    expect(out.reply).toMatch(/arguments\.priority must be <= 2147483647/);
  });

  it("stays fast on long, adversarial input", async () => {
    const inputs = [
      `show mission ${"a ".repeat(2000)}`,
      `create mission ${"a.".repeat(2000)} in domain ${"b ".repeat(500)}`,
      `tell ${"x ".repeat(1500)}`,
      `"${"q".repeat(3000)}`,
      `submit task ${"'a' ".repeat(800)} to mission ${"m,".repeat(400)}`,
    ];
    const started = Date.now();
    for (const input of inputs) await plan(input);
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});
