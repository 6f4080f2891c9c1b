// The interactive console: tab navigation, approving from the keyboard, the composer, live
// events — with an in-memory data source, and once against a real in-process tower.
import { render } from "ink-testing-library";
import { waitFor } from "../test-support/wait.js";
import { afterAll, describe, expect, it } from "vitest";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { ApprovalService, ApprovalStatus } from "../gen/ep/tower/v1/approvals_pb.js";
import { startTower, type TestTower } from "./harness.js";
import { App } from "../cli/tui/app.js";
import type { ApprovalItem, EventItem, FrameItem, TaskDetail, TuiDataSource } from "../cli/tui/data-source.js";
import { createTowerSource, eventDetail } from "../cli/tui/tower-source.js";
import { viewSpecLines } from "../cli/tui/view-spec-text.js";
import { TaskScreen } from "../cli/tui/views.js";
import { denialLines } from "../cli/denials.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

const until = (cond: () => boolean, ms = 5000) => waitFor(cond, ms, 10);

/** A small in-memory source: the TUI's interface boundary, not our tower code. */
function memorySource() {
  const approvals: ApprovalItem[] = [
    {
      sessionId: "ses_1",
      id: "act_1",
      tool: "create_mission",
      summary: "create mission 'Ship v2'",
      status: "pending",
      session: "release chat",
    },
    {
      sessionId: "ses_1",
      id: "act_2",
      tool: "retry_task",
      summary: "retry tsk_9",
      status: "pending",
      session: "release chat",
    },
  ];
  const decisions: string[] = [];
  const chats: string[] = [];
  let push: ((e: EventItem) => void) | undefined;
  const task: TaskDetail = {
    id: "tsk_1",
    missionId: "msn_1",
    title: "Run the tests",
    status: "running",
    runtime: "vendorA_code",
    agent: "builder",
    attempts: 1,
    maxAttempts: 3,
    createdAt: "2026-11-26T06:00:00Z",
    output: "",
    error: "",
    usage: "",
  };
  const frames: FrameItem[] = [
    { id: 10, kind: "status", text: "session started" },
    { id: 11, kind: "text", text: "reading the test suite" },
    { id: 12, kind: "tool", text: "Bash npm test", data: { phase: "call" } },
  ];
  const source: TuiDataSource = {
    label: "memory",
    missions: async () => [{ id: "msn_1", domainId: "dom_1", domainName: "acme", title: "Ship v2", status: "open" }],
    agents: async () => [
      { id: "agt_1", name: "builder", domainId: "dom_1", runtime: "shell", state: "busy", taskTitle: "Run the tests" },
    ],
    approvals: async () => approvals.filter((a) => a.status === "pending"),
    tasks: async () => [task],
    task: async () => ({ ...task }),
    frames: async () => frames,
    cancelTask: async () => ({ ...Object.assign(task, { status: "cancelled" }) }),
    retryTask: async () => ({ ...Object.assign(task, { status: "queued" }) }),
    subscribe(onEvent) {
      push = onEvent;
      return () => (push = undefined);
    },
    chat: async (content) => {
      chats.push(content);
      return {
        sessionId: "ses_1",
        text: `heard: ${content}`,
        actions: [],
        viewSpecs: [
          {
            type: "table",
            title: "Missions",
            columns: ["title", "status"],
            rows: [
              ["Ship v2", "open"],
              ["Q3 audit", "done"],
            ],
          },
        ],
      };
    },
    async approve(s, a) {
      decisions.push(`approve ${s}/${a}`);
      const item = approvals.find((x) => x.id === a)!;
      item.status = "approved";
      return item;
    },
    async reject(s, a) {
      decisions.push(`reject ${s}/${a}`);
      const item = approvals.find((x) => x.id === a)!;
      item.status = "rejected";
      return item;
    },
    close() {},
  };
  return { source, decisions, chats, emit: (e: EventItem) => push?.(e) };
}

const lineWith = (frame: string, text: string) => frame.split("\n").find((l) => l.includes(text));

describe("the ep console", () => {
  it("navigates the tabs from the keyboard", async () => {
    const { source } = memorySource();
    const ui = render(<App source={source} />);
    await until(() => ui.lastFrame()!.includes("Ship v2"));
    expect(ui.lastFrame()).toMatch(/1 missions/);
    ui.stdin.write("2");
    await until(() => ui.lastFrame()!.includes("builder"));
    ui.stdin.write("\t");
    await until(() => ui.lastFrame()!.includes("create mission 'Ship v2'"));
    expect(ui.lastFrame()).toContain("approvals (2)");
    ui.stdin.write("4");
    await until(() => ui.lastFrame()!.includes("waiting for events"));
    ui.unmount();
  });

  it("approves and rejects the selected action and says what each did; the session shows by its title", async () => {
    const { source, decisions } = memorySource();
    const ui = render(<App source={source} initialTab="approvals" />);
    await until(() => ui.lastFrame()!.includes("retry tsk_9"));
    expect(ui.lastFrame()).toContain('session "release chat"');
    expect(ui.lastFrame()).not.toContain("ses_1");
    ui.stdin.write("a");
    await until(() => decisions.length === 1);
    expect(decisions).toEqual(["approve ses_1/act_1"]);
    await until(() => ui.lastFrame()!.includes("approved and done: create mission 'Ship v2'"));
    ui.stdin.write("r");
    await until(() => decisions.length === 2);
    expect(decisions[1]).toBe("reject ses_1/act_2");
    await until(() => ui.lastFrame()!.includes("nothing waits for approval"));
    await until(() => ui.lastFrame()!.includes("rejected: retry tsk_9; nothing was changed"));
    ui.unmount();
  });

  it("sends the composer's text to the AI session and shows live events, one line each", async () => {
    const { source, emit } = memorySource();
    const ui = render(<App source={source} initialTab="console" />);
    await until(() => ui.lastFrame()!.includes("> "));
    for (const ch of "list missions") ui.stdin.write(ch);
    await until(() => ui.lastFrame()!.includes("list missions"));
    ui.stdin.write("\r");
    await until(() => ui.lastFrame()!.includes("heard: list missions"));
    ui.stdin.write("\u001b"); // Esc leaves the composer
    await until(() => ui.lastFrame()!.includes("Enter open tasks"));
    ui.stdin.write("4");
    emit({
      id: 41,
      type: "matrix",
      name: "task.succeeded",
      status: "succeeded",
      detail: '"Run the tests"',
      at: "2026-11-26T06:01:02Z",
    });
    await until(() => ui.lastFrame()!.includes("task.succeeded"));
    expect(lineWith(ui.lastFrame()!, "task.succeeded")!.trim()).toMatch(
      /^\d\d:\d\d:\d\d\s+task\.succeeded\s+succeeded\s+"Run the tests"$/,
    );
    ui.unmount();
  });

  it("a pasted multi-word prompt arrives whole, also when Enter follows in the same tick", async () => {
    const { source, chats } = memorySource();
    const ui = render(<App source={source} initialTab="console" />);
    await until(() => ui.lastFrame()!.includes("> "));
    ui.stdin.write("fix the flaky test in mission Ship v2");
    ui.stdin.write("\r");
    await until(() => chats.length === 1);
    expect(chats[0]).toBe("fix the flaky test in mission Ship v2");
    // typed fast: every key lands, in order; a line pasted with a break stays one line
    for (const ch of "abc") ui.stdin.write(ch);
    ui.stdin.write(" def\nghi");
    ui.stdin.write("\r");
    await until(() => chats.length === 2);
    expect(chats[1]).toBe("abc def ghi");
    ui.unmount();
  });

  it("the console tab renders a table result with aligned columns", async () => {
    const { source } = memorySource();
    const ui = render(<App source={source} initialTab="console" />);
    await until(() => ui.lastFrame()!.includes("> "));
    ui.stdin.write("list missions");
    ui.stdin.write("\r");
    await until(() => ui.lastFrame()!.includes("Q3 audit"));
    const frame = ui.lastFrame()!;
    const head = lineWith(frame, "TITLE")!;
    expect(head.trim()).toMatch(/^TITLE\s+STATUS$/);
    expect(lineWith(frame, "Ship v2  ")!.trim()).toMatch(/^Ship v2\s+open$/);
    expect(lineWith(frame, "Q3 audit")!.trim()).toMatch(/^Q3 audit\s+done$/);
    // the STATUS column starts at the same place on every row
    expect(lineWith(frame, "Q3 audit")!.indexOf("done")).toBe(head.indexOf("STATUS"));
    ui.unmount();
  });

  it("opens a task from its mission: header, frames so far, live frames; cancel; Esc goes back", async () => {
    const { source, emit } = memorySource();
    const ui = render(<App source={source} />);
    await until(() => ui.lastFrame()!.includes("Ship v2"));
    expect(ui.lastFrame()).toContain("acme"); // the domain by name
    ui.stdin.write("\r");
    await until(() => ui.lastFrame()!.includes("Run the tests"));
    expect(ui.lastFrame()).toContain("Claude Code");
    expect(ui.lastFrame()).toContain("Enter open task");
    ui.stdin.write("\r");
    await until(() => ui.lastFrame()!.includes("reading the test suite"));
    const frame = ui.lastFrame()!;
    expect(frame).toContain("[running]");
    expect(frame).toContain("agent builder");
    expect(frame).toContain("  · session started");
    expect(frame).toContain("  ⚙ Bash npm test");
    expect(frame).toContain("c cancel (asks first) · r retry · Esc back");
    emit({
      id: 13,
      type: "progress",
      name: "task.progress",
      status: "",
      detail: "12 passed",
      taskId: "tsk_1",
      frame: { id: 13, kind: "text", text: "12 passed" },
    });
    await until(() => ui.lastFrame()!.includes("12 passed"));
    // c asks first; any key but y keeps the task running
    ui.stdin.write("c");
    await until(() => ui.lastFrame()!.includes('cancel "Run the tests"? y cancels it, any other key keeps it'));
    ui.stdin.write("n");
    await until(() => ui.lastFrame()!.includes("not cancelled: the task goes on"));
    expect(ui.lastFrame()).toContain("[running]");
    ui.stdin.write("c");
    await until(() => ui.lastFrame()!.includes("y cancels it"));
    ui.stdin.write("y");
    await until(() => ui.lastFrame()!.includes("[cancelled]"));
    expect(ui.lastFrame()).toContain('cancelled "Run the tests" (cancelled)');
    ui.stdin.write("\u001b");
    await until(() => ui.lastFrame()!.includes("Enter open task ·"));
    ui.stdin.write("\u001b");
    await until(() => ui.lastFrame()!.includes("Enter open tasks"));
    ui.unmount();
  });

  it("a mission's task list says what a waiting task waits on, by step name (issue 40)", async () => {
    const { source } = memorySource();
    const build: TaskDetail = {
      id: "tsk_2",
      missionId: "msn_1",
      title: "build",
      status: "running",
      runtime: "shell",
      agent: "builder",
      attempts: 1,
      maxAttempts: 3,
      createdAt: "2026-11-26T06:00:00Z",
      output: "",
      error: "",
      usage: "",
    };
    source.tasks = async () => [
      build,
      { ...build, id: "tsk_3", title: "ship", status: "waiting", agent: "", waitingOn: ["build", "lint"] },
    ];
    const ui = render(<App source={source} />);
    await until(() => ui.lastFrame()!.includes("Ship v2"));
    ui.stdin.write("\r");
    await until(() => ui.lastFrame()!.includes("ship"));
    expect(lineWith(ui.lastFrame()!, "ship")).toMatch(/ship\s+waiting on build, lint/);
    expect(lineWith(ui.lastFrame()!, "build ")).toMatch(/build\s+running/);
    ui.unmount();
  });

  it("the task view folds each run of stderr lines into a count (issue 34)", () => {
    const task: TaskDetail = {
      id: "tsk_8",
      missionId: "msn_1",
      title: "Ask",
      status: "running",
      runtime: "vendorC",
      agent: "builder",
      attempts: 1,
      maxAttempts: 3,
      createdAt: "2026-11-26T06:00:00Z",
      output: "",
      error: "",
      usage: "",
    };
    const frames: FrameItem[] = [
      { id: 1, kind: "stderr", text: "Warning: 256-color support not detected." },
      { id: 2, kind: "stderr", text: "Attempt 1 failed with status 500. Retrying with backoff..." },
      { id: 3, kind: "status", text: "model API error 500, retry 1: the fixture is overloaded (500)" },
      { id: 4, kind: "text", text: "an older stderr line", data: { stream: "stderr" } },
      { id: 5, kind: "text", text: "codeword pelican-773" },
    ];
    const ui = render(<TaskScreen task={task} frames={frames} width={100} />);
    const frame = ui.lastFrame()!;
    expect(frame).toContain("  ⋯ 2 stderr lines (ep task watch tsk_8 --stderr shows them)");
    expect(frame).toContain("  ⋯ 1 stderr line (ep task watch tsk_8 --stderr shows them)");
    expect(frame).toContain("  · model API error 500, retry 1: the fixture is overloaded (500)");
    expect(frame).toContain("codeword pelican-773");
    expect(frame).not.toContain("Warning: 256-color");
    ui.unmount();
  });

  it("the task view says why a queued task waits", () => {
    const task: TaskDetail = {
      id: "tsk_7",
      missionId: "msn_1",
      title: "Nobody here",
      status: "queued",
      runtime: "shell",
      agent: "",
      attempts: 0,
      maxAttempts: 3,
      createdAt: "2026-11-26T06:00:00Z",
      output: "",
      error: "",
      usage: "",
      wait: "no_agent_in_domain: no agent serves domain dom_1; enroll one on this machine's node",
    };
    const ui = render(<TaskScreen task={task} frames={[]} width={60} />);
    expect(ui.lastFrame()!.replace(/\n/g, " ")).toMatch(
      /waiting: no_agent_in_domain: no agent serves domain dom_1;\s+enroll one on this machine's node/,
    );
    ui.unmount();
  });

  it("the task view shows a workspace task's branch and diff stat (issue 20)", () => {
    const task: TaskDetail = {
      id: "tsk_9",
      missionId: "msn_1",
      title: "Fix it",
      status: "succeeded",
      runtime: "shell",
      agent: "builder",
      attempts: 1,
      maxAttempts: 3,
      createdAt: "2026-11-26T06:00:00Z",
      output: "",
      error: "",
      usage: "",
      workspace: {
        branch: "branch ep/tsk_9 (1a2b3c4d..5e6f7a8b)",
        stat: " app.txt | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)",
      },
    };
    const ui = render(<TaskScreen task={task} frames={[]} width={80} />);
    const frame = ui.lastFrame()!;
    expect(frame).toContain("changes");
    expect(frame).toContain("branch ep/tsk_9 (1a2b3c4d..5e6f7a8b)");
    expect(frame).toContain("app.txt | 2 +-");
    expect(frame).toContain("1 file changed");
    ui.unmount();
  });

  it(
    "the task view of a run whose agent was refused tools: the " +
      "count beside the status, each refusal as it happened and listed",
    () => {
      const task: TaskDetail = {
        id: "tsk_8",
        missionId: "msn_1",
        title: "Write it",
        status: "succeeded",
        runtime: "vendorA_code",
        agent: "builder",
        attempts: 1,
        maxAttempts: 3,
        createdAt: "2026-11-26T06:00:00Z",
        output: "done",
        error: "",
        usage: "",
        denials: denialLines([
          { tool: "Bash", tried: "echo hi > /root/x", reason: "needs approval", source: "policy" },
        ]),
      };
      const denial = { tool: "Bash", tried: "echo hi > /root/x", reason: "needs approval", source: "policy" };
      const ui = render(
        <TaskScreen
          task={task}
          frames={[
            {
              id: 1,
              kind: "status",
              text: "refused (policy): Bash echo hi > /root/x: needs approval",
              data: { denial },
            },
          ]}
          width={100}
        />,
      );
      const frame = ui.lastFrame()!;
      expect(frame).toContain("[succeeded — 1 tool call refused]");
      expect(frame).toContain("⚠ refused (policy): Bash echo hi > /root/x: needs approval");
      expect(frame).toMatch(/refused\n\s+policy\s+Bash echo hi > \/root\/x: needs approval/);
      ui.unmount();
    },
  );

  it("shows the keys of each tab in the footer", async () => {
    const { source } = memorySource();
    const ui = render(<App source={source} />);
    await until(() => ui.lastFrame()!.includes("Ship v2"));
    expect(ui.lastFrame()).toContain("1-5 or Tab: switch");
    ui.stdin.write("3");
    await until(() => ui.lastFrame()!.includes("a approve · r reject"));
    ui.stdin.write("2");
    await until(() => ui.lastFrame()!.includes("Run the tests")); // the agent's running task
    ui.stdin.write("5");
    await until(() => ui.lastFrame()!.includes("Enter send"));
    ui.unmount();
  });
});

describe("view_specs and events as text", () => {
  it("renders kv, cards, timelines and unknown views; strips control characters; fits the width", () => {
    expect(
      viewSpecLines(
        {
          type: "kv",
          items: [
            { key: "status", value: "open" },
            { key: "priority", value: 3 },
          ],
        },
        80,
      ),
    ).toEqual(["status    open", "priority  3"]);
    expect(
      viewSpecLines(
        { type: "cards", cards: [{ title: "builder", status: "idle", fields: [{ key: "runtime", value: "shell" }] }] },
        80,
      ),
    ).toEqual(["• builder  [idle]", "    runtime  shell"]);
    expect(
      viewSpecLines({ type: "timeline", items: [{ at: "2026-11-26T06:00:00Z", title: "task.succeeded" }] }, 80),
    ).toEqual(["2026-11-26 06:00:00  task.succeeded"]);
    expect(viewSpecLines({ type: "log_stream", lines: ["a\u001b[31mred", "b"] }, 80)).toEqual(["a [31mred", "b"]);
    expect(viewSpecLines({ type: "chart" }, 80)[0]).toContain("cannot show");
    expect(viewSpecLines({ type: "table", columns: ["a"], rows: [["x".repeat(100)]] }, 20)[1]).toHaveLength(20);
  });

  it("an event's detail names what it is about, never its JSON (the same words as ep events tail)", () => {
    const ev = (type: string, name: string, status: string, payload: Record<string, unknown>) => ({
      type,
      name,
      status,
      payload: payload as never,
      taskId: "tsk_1",
      agentId: "",
    });
    expect(eventDetail(ev("matrix", "task.failed", "failed", { title: "Run tests", error: "exit 1" }))).toBe(
      '"Run tests" task tsk_1 → failed : exit 1',
    );
    expect(eventDetail(ev("progress", "task.progress", "", { kind: "text", text: "line\none" }))).toBe(
      "task tsk_1 [text] line one",
    );
    expect(eventDetail(ev("matrix", "x", "", { x: { y: 1 } }))).toBe("task tsk_1");
    // agents by name where one is known, by their shortened id where not
    const names = new Map([["agt_0123456789abcdef", "shell-1"]]);
    const claimed = ev("matrix", "task.claimed", "claimed", { title: "Run tests", claimed_by: "agt_0123456789abcdef" });
    expect(eventDetail(claimed, (id) => names.get(id))).toBe('"Run tests" task tsk_1 by shell-1 → claimed');
    expect(eventDetail(claimed)).toBe('"Run tests" task tsk_1 by agt_01234567… → claimed');
    const enrolled = {
      ...ev("matrix", "agent.enrolled", "idle", { agent_id: "agt_0123456789abcdef", name: "shell-1" }),
      taskId: "",
    };
    expect(eventDetail(enrolled, (id) => names.get(id))).toBe('"shell-1" → idle');
  });
});

describe("the ep console on a real tower", () => {
  let t: TestTower | undefined;
  afterAll(async () => {
    await t?.close();
  });

  it("shows the tower's missions and follows its event stream", async () => {
    t = await startTower();
    const work = t.client(WorkService);
    const domain = (await work.createDomain({ name: "tui" })).domain!;
    await work.createMission({ domainId: domain.id, title: "First mission" });
    const source = createTowerSource(t.transport(), t.url);
    const ui = render(<App source={source} />);
    await until(() => ui.lastFrame()!.includes("First mission"), 10_000);
    ui.stdin.write("4");
    await until(() => ui.lastFrame()!.includes("waiting for events"));
    // the stream starts at the newest event, so it is live once an event reaches it: a probe
    // domain per try until one shows
    let probes = 0;
    await waitFor(
      async () =>
        !ui.lastFrame()!.includes("waiting for events") ||
        (await work.createDomain({ name: `probe-${++probes}` }), false),
      10_000,
      100,
    );
    await work.createMission({ domainId: domain.id, title: "Second mission" });
    await until(
      () =>
        /mission/.test(ui.lastFrame()!.split("\n").slice(2).join("\n")) &&
        !ui.lastFrame()!.includes("waiting for events"),
      10_000,
    );
    ui.stdin.write("1");
    await until(() => ui.lastFrame()!.includes("Second mission"), 10_000);
    ui.unmount();
    source.close();
  });

  it(
    "names, not ids, on every screen: an agent enrolled without a " +
      "name is shell-1, in tasks, agents and event lines (issue 38)",
    async () => {
      const tower = await startTower();
      const work = tower.client(WorkService);
      const domainId = (await work.createDomain({ name: "named" })).domain!.id;
      const missionId = (await work.createMission({ domainId, title: "Named mission" })).mission!.id;
      const node = await tower.client(NodeService).registerNode({ hostname: "tui-names", domainIds: [domainId] });
      const source = createTowerSource(tower.transport(), tower.url);
      const ui = render(<App source={source} initialTab="events" />);
      const ids = /\b(agt|dom|ses|msn)_[0-9a-z]/;
      try {
        await until(() => ui.lastFrame()!.includes("waiting for events"), 10_000);
        const agentId = (await tower.client(AgentService, node.token).enrollAgent({ domainId, runtime: Runtime.SHELL }))
          .agent!.id;
        await work.createTask({ missionId, title: "named run", runtime: Runtime.SHELL, input: { command: "true" } });
        await tower.client(WorkService, node.token).claimTask({ agentId });
        await until(() => ui.lastFrame()!.includes("by shell-1"), 10_000);
        expect(ui.lastFrame()).not.toMatch(ids);
        ui.stdin.write("2");
        await until(() => ui.lastFrame()!.includes("shell-1"), 10_000);
        expect(ui.lastFrame()).not.toMatch(ids);
        ui.stdin.write("1");
        await until(() => ui.lastFrame()!.includes("Named mission"), 10_000);
        expect(ui.lastFrame()).not.toMatch(ids);
        ui.stdin.write("\r");
        await until(() => ui.lastFrame()!.includes("named run"), 10_000);
        expect(ui.lastFrame()).toContain("shell-1");
        expect(ui.lastFrame()).not.toMatch(ids);
      } finally {
        ui.unmount();
        source.close();
        await tower.close();
      }
    },
  );

  it(
    "lists an agent's tool-permission request in the " + "approvals tab and approves it from the keyboard (issue 20)",
    async () => {
      const tower = await startTower();
      const work = tower.client(WorkService);
      const domainId = (await work.createDomain({ name: "asks" })).domain!.id;
      const missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;
      const node = await tower.client(NodeService).registerNode({ hostname: "tui-node", domainIds: [domainId] });
      const agentId = (
        await tower.client(AgentService, node.token).enrollAgent({ domainId, runtime: Runtime.SHELL, name: "asker" })
      ).agent!.id;
      await work.createTask({ missionId, title: "edit", runtime: Runtime.SHELL, input: { command: "true" } });
      const held = (await tower.client(WorkService, node.token).claimTask({ agentId })).task!;
      const asked = (
        await tower
          .client(ApprovalService, node.token)
          .requestPermission({ taskId: held.id, agentId, tool: "Bash", title: "rm -rf build" })
      ).approval!;
      const source = createTowerSource(tower.transport(), tower.url);
      const ui = render(<App source={source} initialTab="approvals" />);
      try {
        await until(() => ui.lastFrame()!.includes(`rm -rf build (task ${held.id})`), 10_000);
        ui.stdin.write("a");
        await until(() => ui.lastFrame()!.includes("allowed: rm -rf build"), 10_000);
        expect(ui.lastFrame()).toContain("the agent goes on with it");
        expect((await tower.client(ApprovalService).getApproval({ approvalId: asked.id })).approval!.status).toBe(
          ApprovalStatus.APPROVED,
        );
      } finally {
        ui.unmount();
        source.close();
        await tower.close();
      }
    },
  );
});
