// Every view_spec type renders as React text; hostile strings stay text; bad shapes never throw.
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { ViewSpecView, type ActionContext } from "./view-spec.js";

const html = (spec: unknown, ctx?: ActionContext) => renderToStaticMarkup(<ViewSpecView spec={spec} ctx={ctx} />);

describe("view_spec renderers", () => {
  it("renders a table with its columns, rows and status badges", () => {
    const out = html({
      type: "table",
      title: "Missions",
      columns: ["id", "title", "status"],
      rows: [
        ["msn_1", "Release", "open"],
        ["msn_2", null, "failed"],
      ],
    });
    expect(out).toContain('<h4 class="vs-title">Missions</h4>');
    expect(out).toContain('<th scope="col">title</th>');
    expect(out).toContain("<td>Release</td>");
    expect(out).toContain("<td>—</td>");
    expect(out).toContain('<span class="badge badge-bad">failed</span>');
  });

  it("renders kv, cards, timeline and log_stream", () => {
    expect(
      html({
        type: "kv",
        items: [
          { key: "status", value: "open" },
          { key: "attempts", value: 2 },
          { key: "ok", value: true },
        ],
      }),
    ).toMatch(/<dt>status<\/dt><dd>open<\/dd>.*<dt>attempts<\/dt><dd>2<\/dd>.*<dd>true<\/dd>/);
    const cards = html({
      type: "cards",
      cards: [{ title: "builder", subtitle: "shell", status: "idle", fields: [{ key: "node", value: "build-01" }] }],
    });
    expect(cards).toContain("<strong>builder</strong>");
    expect(cards).toContain('badge-ok">idle');
    expect(cards).toContain("<dd>build-01</dd>");
    const tl = html({
      type: "timeline",
      items: [{ at: "2026-03-01T12:00:00Z", title: "task.created", detail: "tsk_1" }],
    });
    expect(tl).toContain('<time class="muted">2026-03-01T12:00:00Z</time>');
    expect(tl).toContain("task.created");
    expect(html({ type: "log_stream", lines: ["one", "two"] })).toContain("one\ntwo</pre>");
  });

  it("binds action_bar buttons to the action's live status", () => {
    const decided: string[] = [];
    const ctx: ActionContext = {
      statusOf: (id) => (id === "act_done" ? "approved" : "pending"),
      busy: () => false,
      decide: (id, d) => decided.push(`${d}:${id}`),
    };
    const bar = {
      type: "action_bar",
      actions: [
        { action_id: "act_1", label: "Approve act_1", kind: "approve" },
        { action_id: "act_1", label: "Reject act_1", kind: "reject" },
        { action_id: "act_done", label: "Approve act_done", kind: "approve" },
      ],
    };
    const out = html(bar, ctx);
    expect(out).toContain('class="btn btn-approve">Approve act_1</button>');
    expect(out).toContain('class="btn btn-reject">Reject act_1</button>');
    expect(out).not.toContain("Approve act_done</button>");
    expect(out).toContain('badge-ok">approved');
  });

  it("keeps markup and script in data as text", () => {
    const hostile = "<img src=x onerror=alert(1)>";
    const out =
      html({ type: "table", columns: [hostile], rows: [[hostile]] }) +
      html({ type: "log_stream", lines: [hostile, "javascript:alert(1)"] });
    expect(out).not.toContain("<img");
    expect(out).toContain("&lt;img src=x onerror=alert(1)&gt;");
    expect(out).not.toContain("href");
  });

  it("shows unknown types and malformed specs as a notice with their JSON, without throwing", () => {
    expect(html({ type: "chart", data: [1] })).toContain("has an unknown type");
    expect(html(null)).toContain("has an unknown type");
    expect(() => html({ type: "table", columns: "nope", rows: 7 })).not.toThrow();
    expect(() => html({ type: "cards", cards: [null, { title: { x: 1 } }] })).not.toThrow();
    expect(html({ type: "kv", items: [{ key: "k", value: { nested: true } }] })).toContain("{&quot;nested&quot;:true}");
  });
});
