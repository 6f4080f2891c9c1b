// The interactive console: tab navigation, approving from the keyboard, the composer, live
// events — with an in-memory data source, and once against a real in-process tower.
import { render } from "ink-testing-library";
import { afterAll, describe, expect, it } from "vitest";
import { WorkService } from "../../gen/ep/tower/v1/work_pb.js";
import { startTower, type TestTower } from "../../tests/harness.js";
import { App } from "./app.js";
import type { ApprovalItem, EventItem, TuiDataSource } from "./data-source.js";
import { createTowerSource } from "./tower-source.js";

async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error("condition not met");
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A small in-memory source: the TUI's interface boundary, not our tower code. */
function memorySource() {
  const approvals: ApprovalItem[] = [
    { sessionId: "ses_1", id: "act_1", tool: "create_mission", summary: "create mission 'Ship v2'", status: "pending" },
    { sessionId: "ses_1", id: "act_2", tool: "retry_task", summary: "retry tsk_9", status: "pending" },
  ];
  const decisions: string[] = [];
  let push: ((e: EventItem) => void) | undefined;
  const source: TuiDataSource = {
    label: "memory",
    missions: async () => [{ id: "msn_1", domainId: "dom_1", title: "Ship v2", status: "open" }],
    agents: async () => [{ id: "agt_1", name: "builder", domainId: "dom_1", runtime: "shell", state: "idle" }],
    approvals: async () => approvals.filter((a) => a.status === "pending"),
    subscribe(onEvent) {
      push = onEvent;
      return () => (push = undefined);
    },
    chat: async (content) => ({ sessionId: "ses_1", text: `heard: ${content}`, actions: [] }),
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
  return { source, decisions, emit: (e: EventItem) => push?.(e) };
}

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

  it("approves and rejects the selected action", async () => {
    const { source, decisions } = memorySource();
    const ui = render(<App source={source} initialTab="approvals" />);
    await until(() => ui.lastFrame()!.includes("retry tsk_9"));
    ui.stdin.write("a");
    await until(() => decisions.length === 1);
    expect(decisions).toEqual(["approve ses_1/act_1"]);
    await until(() => !ui.lastFrame()!.includes("create mission 'Ship v2'"));
    expect(ui.lastFrame()).toContain("act_1 approved");
    ui.stdin.write("r");
    await until(() => decisions.length === 2);
    expect(decisions[1]).toBe("reject ses_1/act_2");
    await until(() => ui.lastFrame()!.includes("nothing waits for approval"));
    ui.unmount();
  });

  it("sends the composer's text to the AI session and shows live events", async () => {
    const { source, emit } = memorySource();
    const ui = render(<App source={source} initialTab="console" />);
    await until(() => ui.lastFrame()!.includes("> "));
    await new Promise((r) => setTimeout(r, 50));
    for (const ch of "list missions") ui.stdin.write(ch);
    await until(() => ui.lastFrame()!.includes("list missions"));
    ui.stdin.write("\r");
    await until(() => ui.lastFrame()!.includes("heard: list missions"));
    ui.stdin.write("\u001b"); // Esc leaves the composer
    await until(() => ui.lastFrame()!.includes("Ship v2"));
    ui.stdin.write("4");
    emit({ id: 41, type: "matrix", name: "task.succeeded", status: "succeeded", detail: "task=tsk_1" });
    await until(() => ui.lastFrame()!.includes("task.succeeded"));
    ui.unmount();
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
    await new Promise((r) => setTimeout(r, 300));
    await work.createMission({ domainId: domain.id, title: "Second mission" });
    await until(() => /mission/.test(ui.lastFrame()!.split("\n").slice(2).join("\n")) && !ui.lastFrame()!.includes("waiting for events"), 10_000);
    ui.stdin.write("1");
    await until(() => ui.lastFrame()!.includes("Second mission"), 10_000);
    ui.unmount();
    source.close();
  });
});
