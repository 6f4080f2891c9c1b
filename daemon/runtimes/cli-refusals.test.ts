// Each CLI's refusals, read from its own event lines. claude's and gemini's lines in
// fixtures/refusals/ were recorded from the real CLIs (claude 2.1.330, gemini-cli 0.61.0) run
// against llmock with a fixture asking for a shell write (claude: outside its working directory;
// gemini: with its shell tool not enabled), and codex 0.169's rollout of a thread whose
// `exec_command` write hit its read-only sandbox (its `exec --json` prints no item for that tool,
// so the `command_execution` lines here are the documented shape).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { FIXTURES } from "./fixtures/harness.js";
import { claudeRefusals, codexRefusals, geminiRefusals, refusing } from "./cli-refusals.js";
import { createDenialList, DENIAL_FIELD_LIMIT, DENIAL_LIMIT, refusalIn } from "./denials.js";
import type { StreamParser } from "./process-runtime.js";
import type { ProgressFrame } from "./runtime.js";
import { createVendorACodeParser } from "./vendor-a-code.js";
import { createVendorBParser } from "./vendor-b.js";
import { createVendorCParser } from "./vendor-c.js";

const recorded = (name: string) =>
  readFileSync(join(FIXTURES, "refusals", name), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);

function feed(parser: StreamParser, events: Record<string, unknown>[]): ProgressFrame[] {
  return events.flatMap((e) => parser.event(e));
}

describe("claude -p refusals", () => {
  it(
    "a Bash call outside the working directory: one denial with " +
      "the command and claude's reason, one status frame as it happens",
    () => {
      const parser = refusing(createVendorACodeParser, claudeRefusals)();
      const frames = feed(parser, recorded("claude.jsonl"));
      const outcome = parser.outcome();
      expect(outcome).toMatchObject({ ok: true, output: "claude done" });
      expect(outcome.denials).toEqual([
        {
          tool: "Bash",
          tried: "echo hi > /root/den-hello.txt",
          reason: expect.stringMatching(/^Output redirection to '\/root\/den-hello.txt' needs approval/),
          source: "policy",
          callId: "toolu_ORSKsrhpsD9vY5ls",
        },
      ]);
      const refused = frames.filter((f) => f.data?.denial);
      expect(refused).toHaveLength(1);
      expect(refused[0]).toMatchObject({
        kind: "status",
        text: expect.stringMatching(/^refused \(policy\): Bash echo hi > \/root\/den-hello.txt: Output redirection/),
      });
      // the frame comes when claude refuses, before its closing result
      expect(frames.indexOf(refused[0]!)).toBeLessThan(frames.findIndex((f) => f.text === "finished"));
      expect(frames.some((f) => f.text === "system: permission_denied")).toBe(false);
    },
  );

  it("the closing permission_denials alone (an older claude) still make a denial, with the tool's input", () => {
    const parser = refusing(createVendorACodeParser, claudeRefusals)();
    const result = recorded("claude.jsonl").at(-1)!;
    parser.event(result);
    expect(parser.outcome().denials).toEqual([
      {
        tool: "Bash",
        tried: "echo hi > /root/den-hello.txt",
        reason: "",
        source: "policy",
        callId: "toolu_ORSKsrhpsD9vY5ls",
      },
    ]);
  });

  it("a tool_result error from epd's permission tool is a person's refusal; an ordinary tool error is none", () => {
    const parser = refusing(createVendorACodeParser, claudeRefusals)();
    feed(parser, [
      {
        type: "assistant",
        message: {
          content: [
            { type: "tool_use", id: "t1", name: "Edit", input: { file_path: "/repo/a.ts" } },
            { type: "tool_use", id: "t2", name: "Bash", input: { command: "npm test" } },
          ],
        },
      },
      {
        type: "user",
        message: {
          content: [
            {
              type: "tool_result",
              tool_use_id: "t1",
              is_error: true,
              content: [{ type: "text", text: "a person did not allow this (rejected by ops: no)" }],
            },
          ],
        },
      },
      {
        type: "user",
        message: {
          content: [{ type: "tool_result", tool_use_id: "t2", is_error: true, content: "Exit code 1\n3 tests failed" }],
        },
      },
    ]);
    expect(parser.outcome().denials).toEqual([
      {
        tool: "Edit",
        tried: "/repo/a.ts",
        reason: "a person did not allow this (rejected by ops: no)",
        source: "person",
        callId: "t1",
      },
    ]);
  });

  it("a run without refusals has no denials", () => {
    const parser = refusing(createVendorACodeParser, claudeRefusals)();
    feed(parser, [{ type: "result", subtype: "success", is_error: false, result: "ok", permission_denials: [] }]);
    expect(parser.outcome().denials).toBeUndefined();
  });
});

describe("gemini -o stream-json refusals", () => {
  it("a shell tool gemini has not enabled is an unknown tool, with the command it tried", () => {
    const parser = refusing(createVendorCParser, geminiRefusals)();
    const frames = feed(parser, recorded("gemini.jsonl"));
    expect(parser.outcome()).toMatchObject({ ok: true, output: "gemini done" });
    expect(parser.outcome().denials).toEqual([
      {
        tool: "run_shell_command",
        tried: "echo hi > hello.txt",
        reason:
          'Tool "run_shell_command" not found. Did you mean one of: "update_topic", "grep_search", "invoke_agent"?',
        source: "unknown_tool",
        callId: expect.stringMatching(/^run_shell_command__/),
      },
    ]);
    expect(frames.filter((f) => f.data?.denial)).toHaveLength(1);
  });

  it("gemini's policy and workspace errors are refusals; a failed edit is not", () => {
    const parser = refusing(createVendorCParser, geminiRefusals)();
    feed(parser, [
      { type: "tool_use", tool_name: "write_file", tool_id: "w1", parameters: { file_path: "/etc/x" } },
      {
        type: "tool_result",
        tool_id: "w1",
        status: "error",
        error: { type: "path_not_in_workspace", message: "Path not in workspace: /etc/x" },
      },
      { type: "tool_use", tool_name: "run_shell_command", tool_id: "s1", parameters: { command: "rm -rf /" } },
      {
        type: "tool_result",
        tool_id: "s1",
        status: "error",
        error: { type: "policy_violation", message: "Tool execution denied by policy." },
      },
      { type: "tool_use", tool_name: "replace", tool_id: "e1", parameters: { file_path: "a.ts" } },
      {
        type: "tool_result",
        tool_id: "e1",
        status: "error",
        error: { type: "edit_no_occurrence_found", message: "0 occurrences found" },
      },
    ]);
    expect(parser.outcome().denials?.map((d) => [d.tool, d.tried, d.source])).toEqual([
      ["write_file", "/etc/x", "policy"],
      ["run_shell_command", "rm -rf /", "policy"],
    ]);
  });
});

describe("codex exec --json refusals", () => {
  const command = (id: string, exit: number, output: string) => ({
    type: "item.completed",
    item: {
      id,
      type: "command_execution",
      command: "bash -lc 'echo hi > hello.txt'",
      aggregated_output: output,
      exit_code: exit,
      status: exit ? "failed" : "completed",
    },
  });

  it("a command its sandbox stopped is a sandbox refusal; one that failed on its own is not", () => {
    const parser = refusing(createVendorBParser, codexRefusals)();
    const frames = feed(parser, [
      command("item_1", 1, "/bin/bash: line 1: hello.txt: Read-only file system\n"),
      command("item_2", 1, "npm ERR! 2 tests failed\n"),
      command("item_3", 0, "Permission denied is just text here\n"),
      { type: "turn.completed", usage: { input_tokens: 1, output_tokens: 1 } },
    ]);
    expect(parser.outcome().denials).toEqual([
      {
        tool: "command",
        tried: "bash -lc 'echo hi > hello.txt'",
        reason: "/bin/bash: line 1: hello.txt: Read-only file system",
        source: "sandbox",
        callId: "item_1",
      },
    ]);
    expect(frames.filter((f) => f.data?.denial).map((f) => f.text)).toEqual([
      "refused (sandbox): command bash -lc 'echo hi > hello.txt': /bin/bash: line 1: hello.txt: Read-only file system",
    ]);
  });

  it("a declined command (an approval said no) is a policy refusal", () => {
    const parser = refusing(createVendorBParser, codexRefusals)();
    feed(parser, [
      {
        type: "item.completed",
        item: {
          id: "item_4",
          type: "command_execution",
          command: "rm -rf build",
          aggregated_output: "",
          status: "declined",
        },
      },
    ]);
    expect(parser.outcome().denials).toEqual([
      { tool: "command", tried: "rm -rf build", reason: "declined", source: "policy", callId: "item_4" },
    ]);
  });
});

describe("codex's rollout (its exec_command calls print no item)", () => {
  const threadId = "01a21db9-318d-7b20-b07c-55599840d9fe";
  const withRollout = () => {
    const home = mkdtempSync(join(tmpdir(), "ep-codex-home-"));
    const day = join(home, "sessions", "2026", "11", "27");
    mkdirSync(day, { recursive: true });
    mkdirSync(join(home, "sessions", "2026", "10", "02"), { recursive: true }); // an older day, searched after
    writeFileSync(
      join(day, `rollout-2026-11-27T15-56-45-${threadId}.jsonl`),
      readFileSync(join(FIXTURES, "refusals", "codex-rollout.jsonl")),
    );
    return home;
  };
  // what codex 0.169 printed on stdout for that thread
  const stdout = [
    { type: "thread.started", thread_id: threadId },
    { type: "turn.started" },
    { type: "item.completed", item: { id: "item_0", type: "agent_message", text: "codex done" } },
    { type: "turn.completed", usage: { input_tokens: 0, cached_input_tokens: 0, output_tokens: 0 } },
  ];

  it("a command its sandbox stopped is read from the rollout when the turn ends", () => {
    const home = withRollout();
    try {
      const parser = refusing(createVendorBParser, codexRefusals)({ CODEX_HOME: home });
      const frames = feed(parser, stdout);
      expect(parser.outcome().denials).toEqual([
        {
          tool: "exec_command",
          tried: "echo hi > hello.txt",
          reason: "/bin/bash: line 1: hello.txt: Read-only file system",
          source: "sandbox",
          callId: "call_1LgjgO2l7JnJ1x5s",
        },
      ]);
      expect(frames.at(-1)).toMatchObject({ kind: "status", data: { denial: { tool: "exec_command" } } });
      // HOME/.codex when CODEX_HOME is not set; no rollout, no denials
      expect(
        refusing(createVendorBParser, codexRefusals)({ HOME: join(home, "nowhere") }).outcome().denials,
      ).toBeUndefined();
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it("a refusal the items already reported is not counted again", () => {
    const home = withRollout();
    try {
      const parser = refusing(createVendorBParser, codexRefusals)({ CODEX_HOME: home });
      feed(parser, [
        stdout[0]!,
        {
          type: "item.completed",
          item: {
            id: "item_1",
            type: "command_execution",
            command: "echo hi > hello.txt",
            aggregated_output: "/bin/bash: line 1: hello.txt: Read-only file system\n",
            exit_code: 1,
            status: "failed",
          },
        },
        stdout[3]!,
      ]);
      expect(parser.outcome().denials?.map((d) => d.callId)).toEqual(["item_1"]);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe("the denial list", () => {
  it("keeps at most DENIAL_LIMIT entries, clips each field, and counts a call once", () => {
    const list = createDenialList();
    const long = "x".repeat(DENIAL_FIELD_LIMIT * 3);
    for (let i = 0; i < DENIAL_LIMIT + 20; i++)
      list.add({ tool: "Bash", tried: long, reason: long, source: "sandbox", callId: `c${i}` });
    expect(list.add({ tool: "Bash", tried: "", reason: "again", source: "sandbox", callId: "c0" })).toBeUndefined();
    const all = list.list();
    expect(all).toHaveLength(DENIAL_LIMIT);
    expect(all[0]!.tried.length).toBe(DENIAL_FIELD_LIMIT + 1);
    expect(all[0]!.reason.endsWith("…")).toBe(true);
  });

  it("reads refusals from words, and ordinary failures as none", () => {
    expect(refusalIn("touch: cannot touch '/x': Operation not permitted")).toBe("sandbox");
    expect(refusalIn("Tool execution denied by policy.")).toBe("policy");
    expect(refusalIn("Error: 3 tests failed")).toBeUndefined();
  });
});
