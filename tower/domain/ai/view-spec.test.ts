import { describe, expect, it } from "vitest";
import { EpError } from "../../../common/errors.js";
import {
  actionBarFor,
  isViewSpec,
  scriptHazard,
  toViewSpec,
  toViewSpecs,
  validateViewSpec,
  validateViewSpecs,
} from "./view-spec.js";

function rejection(x: unknown): EpError {
  try {
    validateViewSpec(x);
  } catch (err) {
    expect(err).toBeInstanceOf(EpError);
    expect((err as EpError).code).toBe("invalid_argument");
    return err as EpError;
  }
  throw new Error(`accepted ${JSON.stringify(x)}`);
}

const VALID = {
  table: {
    type: "table",
    title: "Tasks",
    columns: ["id", "status", "priority", "ok"],
    rows: [
      ["tsk_1", "queued", 5, true],
      ["tsk_2", null, -1, false],
    ],
  },
  kv: {
    type: "kv",
    title: "Task",
    items: [
      { key: "id", value: "tsk_1" },
      { key: "attempts", value: 2 },
    ],
  },
  cards: {
    type: "cards",
    cards: [
      { title: "builder-1", subtitle: "vendorA_code", status: "idle", fields: [{ key: "node", value: "nod_1" }] },
      { title: "reviewer" },
    ],
  },
  timeline: {
    type: "timeline",
    items: [{ at: "2025-01-01T00:00:00Z", title: "task.created", detail: "tsk_1 in msn_1" }],
  },
  log_stream: { type: "log_stream", title: "Output", lines: ["$ npm test", "ok 1 - a < b holds", "done"] },
  action_bar: {
    type: "action_bar",
    actions: [
      { action_id: "act_01abc", label: "Approve", kind: "approve" },
      { action_id: "act_01abc", label: "Reject", kind: "reject" },
    ],
  },
};

describe("validateViewSpec", () => {
  it.each(Object.entries(VALID))("accepts a valid %s", (_type, spec) => {
    expect(validateViewSpec(structuredClone(spec))).toEqual(spec);
    expect(isViewSpec(spec)).toBe(true);
  });

  it("rejects unknown types, naming them", () => {
    expect(rejection({ type: "iframe", src: "x" }).message).toMatch(/view_spec\.type must be one of cards, kv, table/);
    expect(rejection({ type: "html", html: "<p>" }).message).toMatch(/HTML|type/);
    rejection({ columns: ["a"], rows: [] });
    rejection(null);
    rejection("table");
    rejection([VALID.table]);
  });

  it("rejects unknown fields at every level, naming the JSON path", () => {
    expect(rejection({ ...VALID.table, style: "color:red" }).details).toMatchObject({ field: "view_spec.style" });
    expect(rejection({ ...VALID.kv, items: [{ key: "a", value: "b", href: "https://x" }] }).details).toMatchObject({
      field: "view_spec.items[0].href",
    });
    expect(
      rejection({ type: "cards", cards: [{ title: "x", fields: [{ key: "k", value: 1, html: "" }] }] }).message,
    ).toMatch(/view_spec\.cards\[0\]\.fields\[0\]\.html is not a known field/);
    rejection({ ...VALID.action_bar, actions: [{ action_id: "act_1", label: "Go", kind: "approve", url: "/x" }] });
  });

  it("rejects event-handler keys anywhere", () => {
    expect(rejection({ ...VALID.kv, onclick: "alert(1)" }).message).toMatch(
      /view_spec\.onclick is an event-handler field/,
    );
    expect(rejection({ type: "kv", items: [{ key: "a", value: "b", onMouseOver: "x" }] }).message).toMatch(
      /onMouseOver/,
    );
    rejection({ type: "cards", cards: [{ title: "x", onerror: "x" }] });
  });

  it("rejects HTML tags in any string", () => {
    const attempts = [
      "<script>alert(1)</script>",
      "<img src=x onerror=alert(1)>",
      "</title><svg/onload=alert(1)>",
      "< script >",
      "<!-- x -->",
      "a <b>bold</b> claim",
      "&lt;script&gt;alert(1)&lt;/script&gt;",
      "&#60;img src=x&#62;",
      "&#x3C;svg&#x3E;",
    ];
    for (const s of attempts) {
      expect(scriptHazard(s), s).toBeDefined();
      expect(rejection({ type: "log_stream", lines: ["fine", s] }).details).toMatchObject({
        field: "view_spec.lines[1]",
      });
    }
    expect(rejection({ type: "table", columns: ["<i>x</i>"], rows: [] }).details).toMatchObject({
      field: "view_spec.columns[0]",
    });
    expect(rejection({ type: "table", columns: ["a"], rows: [["<b>"]] }).details).toMatchObject({
      field: "view_spec.rows[0][0]",
    });
    rejection({ type: "kv", title: "<h1>t</h1>", items: [] });
    rejection({ type: "action_bar", actions: [{ action_id: "act_1", label: "<b>Go</b>", kind: "approve" }] });
  });

  it("rejects script and data URLs, also obfuscated", () => {
    const attempts = [
      "javascript:alert(1)",
      "JavaScript:alert(1)",
      "java\tscript:alert(1)",
      "java\nscript:alert(1)",
      "\u0000javascript:alert(1)",
      "jav\u200bascript:alert(1)",
      "  javascript:void(0)",
      "click javascript:alert(document.cookie)",
      "vbscript:msgbox(1)",
      "data:text/html;base64,PHNjcmlwdD4=",
      "DATA:image/svg+xml,<svg>",
      "data:,alert(1)",
    ];
    for (const s of attempts) {
      expect(scriptHazard(s), JSON.stringify(s)).toBeDefined();
      rejection({ type: "kv", items: [{ key: "link", value: s }] });
    }
  });

  it("keeps ordinary text that merely resembles the patterns", () => {
    for (const s of [
      "metadata: 5 rows",
      "data: 5 rows",
      "x<3",
      "javascript is fun",
      "https://example.com/a?b=1",
      "5 > 3",
    ]) {
      expect(scriptHazard(s), s).toBeUndefined();
    }
  });

  it("rejects wrong shapes: bad cells, ragged rows, bad action ids and kinds", () => {
    expect(rejection({ type: "table", columns: ["a", "b"], rows: [["1"]] }).message).toMatch(
      /rows\[0\] must have 2 cells/,
    );
    rejection({ type: "table", columns: ["a"], rows: [[{ nested: true }]] });
    rejection({ type: "table", columns: [], rows: [] });
    rejection({ type: "kv", items: [{ key: "a", value: [1, 2] }] });
    rejection({ type: "action_bar", actions: [{ action_id: "1; drop table", label: "x", kind: "approve" }] });
    rejection({ type: "action_bar", actions: [{ action_id: "act_1", label: "x", kind: "execute" }] });
    rejection({ type: "action_bar", actions: [] });
    rejection({ type: "timeline", items: [{ title: "no time" }] });
    rejection({ type: "log_stream", lines: "one string" });
    rejection({ type: "log_stream", lines: ["x".repeat(10_001)] });
  });

  it("rejects deep nesting without blowing the stack", () => {
    const deep = JSON.parse(`{"type":"kv","items":${"[".repeat(100_000)}${"]".repeat(100_000)}}`);
    expect(rejection(deep).message).toMatch(/nested too deeply/);
  });

  it("rejects prototype tricks from parsed JSON", () => {
    rejection(JSON.parse('{"type":"kv","items":[],"__proto__":{"polluted":true}}'));
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("validates lists of view_specs with the index in the path", () => {
    expect(validateViewSpecs([VALID.kv, VALID.table])).toHaveLength(2);
    expect(() => validateViewSpecs([VALID.kv, { type: "kv", items: [{ key: "k", value: "<script>" }] }])).toThrow(
      /view_specs\[1\]\.items\[0\]\.value/,
    );
    expect(() => validateViewSpecs({})).toThrow(EpError);
  });
});

describe("toViewSpecs", () => {
  it("turns list results into tables with the useful columns", () => {
    const spec = toViewSpec("list_tasks", {
      tasks: [
        {
          id: "tsk_1",
          title: "Run tests",
          status: "failed",
          kind: "claimable",
          priority: 1,
          attempts: 3,
          capabilities: ["node"],
        },
        { id: "tsk_2", title: "Lint", status: "queued", kind: "claimable", priority: 0, attempts: 0 },
      ],
    });
    expect(spec).toEqual({
      type: "table",
      title: "Tasks",
      columns: ["title", "status", "kind", "priority", "attempts", "id"], // names first, ids last
      rows: [
        ["Run tests", "failed", "claimable", 1, 3, "tsk_1"],
        ["Lint", "queued", "claimable", 0, 0, "tsk_2"],
      ],
    });
  });

  it("accepts bare arrays and unknown list tools", () => {
    expect(toViewSpec("list_domains", [{ id: "dom_1", name: "acme", created_at: "t" }])).toMatchObject({
      type: "table",
      columns: ["name", "created_at", "id"],
    });
    expect(toViewSpec("list_nodes", { nodes: [] })).toEqual({
      type: "table",
      title: "Nodes",
      columns: ["hostname", "status", "last_seen_at", "id"],
      rows: [],
    });
    expect(toViewSpec("something_else", [{ a: 1, b: { c: 2 } }])).toMatchObject({
      type: "table",
      columns: ["a", "b"],
      rows: [[1, '{"c":2}']],
    });
  });

  it("turns single objects into kv, and a task's output into a log_stream", () => {
    const specs = toViewSpecs("get_task", {
      task: { id: "tsk_1", status: "failed", result: { output: "line 1\nline 2", exit_code: 1 } },
    });
    expect(specs[0]).toMatchObject({
      type: "kv",
      title: "Task",
      items: [{ key: "id", value: "tsk_1" }, { key: "status", value: "failed" }, { key: "result" }],
    });
    expect(specs[1]).toEqual({ type: "log_stream", title: "Output", lines: ["line 1", "line 2"] });
    expect(toViewSpec("get_agent", { id: "agt_1", name: "builder-1", capabilities: ["a", "b"] })).toEqual({
      type: "kv",
      title: "Agent",
      items: [
        { key: "id", value: "agt_1" },
        { key: "name", value: "builder-1" },
        { key: "capabilities", value: "a, b" },
      ],
    });
  });

  it("turns events into a timeline", () => {
    const spec = toViewSpec("list_events", {
      events: [
        {
          id: 1,
          type: "approval",
          name: "action.created",
          status: "pending",
          session_id: "ses_1",
          created_at: "2025-01-01T00:00:00Z",
          payload: { tool: "x" },
        },
      ],
    });
    expect(spec).toEqual({
      type: "timeline",
      title: "Events",
      items: [
        {
          at: "2025-01-01T00:00:00Z",
          title: "approval · action.created · pending",
          detail: 'session_id=ses_1 {"tool":"x"}',
        },
      ],
    });
  });

  it("adds an action bar for pending actions", () => {
    const specs = toViewSpecs("list_pending_actions", {
      actions: [
        { id: "act_01", tool: "retry_mesh_task", status: "pending", summary: "retry_mesh_task task_id=tsk_1" },
        { id: "act_02", tool: "cancel_task", status: "approved" },
      ],
    });
    expect(specs.map((s) => s.type)).toEqual(["table", "action_bar"]);
    expect(specs[1]).toEqual(actionBarFor(["act_01"]));
  });

  it("neutralises hostile data so it shows as text and stays valid", () => {
    const specs = toViewSpecs("get_task", {
      task: {
        id: "tsk_1",
        title: "<img src=x onerror=alert(1)>",
        onclick: "javascript:alert(1)",
        description: "&lt;script&gt; data:text/html,hi",
        result: { output: "Array<string>\n<script>alert(1)</script>\njava\tscript:alert(1)" },
      },
    });
    for (const s of specs) expect(() => validateViewSpec(s)).not.toThrow();
    const kv = specs[0];
    expect(kv.type === "kv" && kv.items.find((i) => i.key === "title")?.value).toBe("‹img src=x onerror=alert(1)›");
    expect(specs[1]).toMatchObject({ lines: ["Array‹string›", "‹script›alert(1)‹/script›", "java script:alert(1)"] });
  });

  it("renders per-node cron and supervision reports as one table with the node and report time", () => {
    const cron = toViewSpecs("list_cron_jobs", {
      nodes: [
        {
          node_id: "nod_1",
          hostname: "w1",
          node_status: "online",
          reported_at: "2026-01-01T00:00:00.000Z",
          jobs: [
            {
              name: "standup",
              kind: "cron",
              schedule: "0 9 * * 1-5",
              dispatch: "signal",
              session: "pm",
              next_fire_at: "2026-01-01T09:00:00.000Z",
              running: false,
              last_fire: { status: "failed", fired_at: "2025-12-31T09:00:00.000Z", error: "<b>boom</b>" },
            },
          ],
          config_errors: [
            { file: "/h/cron.toml", line: 7, field: "schedule", item: "x", message: "schedule is required" },
          ],
        },
        {
          node_id: "nod_2",
          reported_at: "2026-01-01T00:00:01.000Z",
          jobs: [{ name: "disk", kind: "heartbeat", interval: "15m", dispatch: "bash" }],
          config_errors: [],
        },
      ],
    });
    expect(cron).toHaveLength(2);
    const [table, errs] = cron;
    expect(table).toMatchObject({
      type: "table",
      title: "Cron jobs",
      columns: [
        "node_id",
        "name",
        "kind",
        "schedule",
        "interval",
        "dispatch",
        "session",
        "next_fire_at",
        "last_fire",
        "running",
        "reported_at",
      ],
    });
    expect(table.type === "table" && table.rows).toEqual([
      [
        "nod_1",
        "standup",
        "cron",
        "0 9 * * 1-5",
        null,
        "signal",
        "pm",
        "2026-01-01T09:00:00.000Z",
        "failed 2025-12-31T09:00:00.000Z ‹b›boom‹/b›",
        false,
        "2026-01-01T00:00:00.000Z",
      ],
      ["nod_2", "disk", "heartbeat", null, "15m", "bash", null, null, "", null, "2026-01-01T00:00:01.000Z"],
    ]);
    expect(errs).toMatchObject({
      type: "table",
      title: "Configuration errors",
      rows: [["nod_1", "/h/cron.toml", 7, "schedule", "x", "schedule is required"]],
    });

    const sup = toViewSpecs("get_supervision", {
      nodes: [
        {
          node_id: "nod_1",
          reported_at: "t",
          agents: [{ profile: "pm", agent_id: "agt_1", name: "pm", state: "running", paused: true, restarts: 3 }],
        },
      ],
    });
    expect(sup).toHaveLength(1);
    expect(sup[0]).toMatchObject({
      title: "Supervision",
      columns: ["node_id", "profile", "agent_id", "name", "state", "paused", "restarts", "reported_at"],
      rows: [["nod_1", "pm", "agt_1", "pm", "running", true, 3, "t"]],
    });
    // no reports yet: an empty table with the columns
    expect(toViewSpecs("list_cron_jobs", { nodes: [] })[0]).toMatchObject({ type: "table", rows: [] });
  });

  it("returns nothing for an undefined result and a kv for a scalar", () => {
    expect(toViewSpecs("create_domain", undefined)).toEqual([]);
    expect(toViewSpec("claim_mesh_task", 42)).toEqual({ type: "kv", items: [{ key: "result", value: 42 }] });
  });
});
