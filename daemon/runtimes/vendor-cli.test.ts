// vendorA_code, vendorB and vendorC end to end: the real adapter spawns the fake CLI from
// fixtures/ (first on PATH), which prints each vendor's real JSON-lines shapes.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { fixtureEnv, makeSpec, testConfig } from "./fixtures/harness.js";
import { createRuntimeRegistry, type RuntimeRegistry } from "./registry.js";

let registry: RuntimeRegistry;
afterEach(async () => {
  await registry?.close();
});

describe("vendorA_code (claude stream-json)", () => {
  it("turns system, assistant, tool and result events into frames and returns the result text", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec, frames } = await makeSpec({ prompt: "add a greeting" });
    const handle = registry.start("vendorA_code", spec);
    expect(handle.pid).toBeGreaterThan(0);
    const result = await handle.result;
    expect(result).toMatchObject({ ok: true, output: "Done: add a greeting", exitCode: 0 });
    expect(frames[0]).toMatchObject({
      kind: "status",
      text: "session started",
      data: { cwd: spec.cwd, model: "fake-vendor-a-model" },
    });
    expect(frames.filter((f) => f.kind === "text").map((f) => f.text)).toEqual([
      "Working on: add a greeting",
      "Done: add a greeting",
    ]);
    const tools = frames.filter((f) => f.kind === "tool");
    expect(tools[0]).toMatchObject({ data: { phase: "call", name: "Bash", id: "toolu_01" } });
    // The fake echoes EP_SECRETS_SESSION from its environment: the run's env reached the child.
    expect(tools[1]).toMatchObject({ data: { phase: "result", id: "toolu_01", content: "ses_test_1" } });
    expect(frames.at(-1)).toMatchObject({ kind: "status", text: "finished", data: { num_turns: 2 } });
  });

  it("a result with is_error fails the run with the CLI's message", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec } = await makeSpec({ prompt: "[fail] please" });
    const result = await registry.start("vendorA_code", spec).result;
    expect(result.ok).toBe(false);
    expect(result.exitCode).toBe(1);
    // claude says subtype "success" with is_error: the error reads as the API error, not "success"
    expect(result.error).toBe("vendorA_code: API Error: 401 invalid x-api-key");
  });

  it("non-JSON lines become text frames", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec, frames } = await makeSpec({ prompt: "[noise] hi" });
    const result = await registry.start("vendorA_code", spec).result;
    expect(result.ok).toBe(true);
    expect(frames).toContainEqual({ kind: "text", text: "this line is not JSON" });
  });

  it("a CLI that refuses its arguments fails with its stderr", async () => {
    const config = testConfig();
    config.vendorA_code.args = ["-p", "{prompt}", "--output-format", "stream-json"];
    registry = createRuntimeRegistry(config);
    const { spec, frames } = await makeSpec();
    const result = await registry.start("vendorA_code", spec).result;
    expect(result).toMatchObject({ ok: false, exitCode: 1 });
    expect(result.error).toContain("requires --verbose");
    expect(frames.some((f) => f.kind === "stderr")).toBe(true);
  });

  it("passes input.claude on as --model, CLAUDE_CODE_MAX_OUTPUT_TOKENS and the run's timeout", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec, frames } = await makeSpec({
      prompt: "[argv]",
      input: { claude: { model: "claude-opus-test", max_tokens: 2048, timeout_seconds: 600 } },
    });
    const result = await registry.start("vendorA_code", spec).result;
    expect(result.ok, result.error).toBe(true);
    expect(JSON.parse(result.output)).toEqual({
      argv: [
        "-p",
        "[argv]",
        "--output-format",
        "stream-json",
        "--verbose",
        "--model",
        "claude-opus-test",
        "--permission-mode",
        "acceptEdits",
        "--allowedTools",
        "mcp__ep",
        "Bash",
      ],
      max_output_tokens: "2048",
    });
    expect(frames[0]).toMatchObject({ kind: "status", data: { model: "claude-opus-test", mcp_servers: [] } });
  });

  it("input.claude.timeout_seconds bounds the run", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec } = await makeSpec({ prompt: "[hang]", input: { claude: { timeout_seconds: 0.3 } } });
    const started = Date.now();
    const result = await registry.start("vendorA_code", spec).result;
    expect(result).toMatchObject({
      ok: false,
      timedOut: true,
      error: expect.stringContaining("timed out after 0.3 s"),
    });
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("permission = \"ask\" names epd's permission prompt tool and refuses a run without EP's tools", async () => {
    const config = testConfig();
    config.vendorA_code = { ...config.vendorA_code, permission: "ask" };
    registry = createRuntimeRegistry(config);
    const { spec } = await makeSpec({ prompt: "[argv]" });
    const bare = await registry.start("vendorA_code", spec).result;
    expect(bare).toMatchObject({
      ok: false,
      error: expect.stringContaining('permission = "ask" needs EP\'s MCP tools'),
    });
    const file = join(spec.cwd, ".ep-mcp.json");
    await writeFile(file, JSON.stringify({ mcpServers: {} }));
    const result = await registry.start("vendorA_code", {
      ...spec,
      mcp: { url: "http://127.0.0.1:9/mcp", token: "epr_t", configFile: file },
    }).result;
    expect(result.ok, result.error).toBe(true);
    expect(JSON.parse(result.output).argv.slice(5)).toEqual([
      "--allowedTools",
      "mcp__ep",
      "--permission-prompt-tool",
      "mcp__ep__permission_prompt",
      "--mcp-config",
      file,
    ]);
  });

  it("adds --mcp-config when the run has EP's tools", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec, frames } = await makeSpec({ prompt: "[argv]" });
    const file = join(spec.cwd, ".ep-mcp.json");
    await writeFile(file, JSON.stringify({ mcpServers: { ep: { type: "http", url: "http://127.0.0.1:9/mcp" } } }));
    const result = await registry.start("vendorA_code", {
      ...spec,
      mcp: { url: "http://127.0.0.1:9/mcp", token: "epr_t", configFile: file },
    }).result;
    expect(result.ok, result.error).toBe(true);
    expect(JSON.parse(result.output)).toEqual({
      argv: [
        "-p",
        "[argv]",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "acceptEdits",
        "--allowedTools",
        "mcp__ep",
        "Bash",
        "--mcp-config",
        file,
      ],
      max_output_tokens: null,
    });
    expect(frames[0]).toMatchObject({ data: { mcp_servers: [{ name: "ep", status: "connected" }] } });
  });

  it.each([
    ["workspace", ["--permission-mode", "acceptEdits", "--allowedTools", "mcp__ep", "Bash"]],
    ["read-only", ["--allowedTools", "mcp__ep"]],
    ["unconfined", ["--permission-mode", "acceptEdits", "--allowedTools", "mcp__ep", "Bash"]],
  ] as const)("permission = %s gives claude %j", async (permission, flags) => {
    // the run is confined too (bwrap; confine.test.ts): here, claude's own flags
    const { spec } = await makeSpec({ prompt: "[argv]", permission });
    registry = createRuntimeRegistry(testConfig());
    const result = await registry.start("vendorA_code", spec).result;
    expect(result.ok, result.error).toBe(true);
    expect(JSON.parse(result.output).argv.slice(5)).toEqual(flags);
  });

  it.each([
    [{ claude: "opus" }, "input.claude"],
    [{ claude: { model: "" } }, "input.claude.model"],
    [{ claude: { model: "--dangerously-skip-permissions" } }, "input.claude.model"],
    [{ claude: { max_tokens: 1.5 } }, "input.claude.max_tokens"],
    [{ claude: { timeout_seconds: -1 } }, "input.claude.timeout_seconds"],
    [{ claude: { temperature: 1 } }, "input.claude.temperature"],
  ])("a malformed input.claude (%j) fails the run naming %s", async (input, field) => {
    registry = createRuntimeRegistry(testConfig());
    const { spec } = await makeSpec({ input });
    const handle = registry.start("vendorA_code", spec);
    expect(handle.pid).toBeUndefined();
    expect(await handle.result).toMatchObject({
      ok: false,
      errorCode: "invalid_argument",
      error: expect.stringContaining(`${field}:`),
    });
  });

  it("an empty prompt is refused before anything runs", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec } = await makeSpec({ prompt: "  " });
    const handle = registry.start("vendorA_code", spec);
    expect(handle.pid).toBeUndefined();
    expect(await handle.result).toMatchObject({
      ok: false,
      errorCode: "invalid_argument",
      error: expect.stringContaining("prompt"),
    });
  });
});

describe("vendorB (codex exec --json)", () => {
  it("maps thread, item and turn events and answers with the last agent message", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec, frames } = await makeSpec({ prompt: "fix the bug" });
    const result = await registry.start("vendorB", spec).result;
    expect(result).toMatchObject({ ok: true, output: "Done: fix the bug", exitCode: 0 });
    expect(frames.map((f) => `${f.kind}:${f.text}`)).toEqual([
      "status:thread started",
      "status:turn started",
      "text:**Planning** the change",
      "tool:$ bash -lc ls",
      "tool:$ bash -lc ls → exit 0",
      "tool:files: add notes.txt",
      "text:Done: fix the bug",
      "status:finished",
    ]);
    expect(frames.at(-1)?.data).toMatchObject({ usage: { output_tokens: 30 } });
  });

  it("turn.failed fails the run with the error message", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec } = await makeSpec({ prompt: "[fail]" });
    const result = await registry.start("vendorB", spec).result;
    expect(result).toMatchObject({ ok: false, exitCode: 1, error: "vendorB: unexpected status 401 Unauthorized" });
  });
});

describe("vendorC (gemini stream-json)", () => {
  it("joins assistant deltas into the output and reports tools", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec, frames } = await makeSpec({ prompt: "summarise" });
    const result = await registry.start("vendorC", spec).result;
    expect(result).toMatchObject({ ok: true, output: "Done: summarise" });
    expect(frames.map((f) => f.kind)).toEqual(["status", "tool", "tool", "text", "text", "status"]);
    expect(frames[1]).toMatchObject({ data: { phase: "call", tool_name: "list_directory" } });
    expect(frames[2]).toMatchObject({ data: { phase: "result", status: "success" } });
  });

  it("a result with status error fails the run with its message", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec } = await makeSpec({ prompt: "[fail]" });
    const result = await registry.start("vendorC", spec).result;
    expect(result).toMatchObject({ ok: false, error: "vendorC: Quota exceeded for model" });
  });
});

describe("a missing runtime binary", () => {
  it.each(["vendorA_code", "vendorB", "vendorC", "vendorA_agent_acp", "muxhost_hosted"] as const)(
    "%s fails with runtime_missing and says which executable",
    async (kind) => {
      const config = testConfig();
      config[kind].command = "ep-no-such-cli";
      registry = createRuntimeRegistry(config);
      const { spec } = await makeSpec();
      const result = await registry.start(kind, spec).result;
      expect(result.ok).toBe(false);
      expect(result.errorCode).toBe("runtime_missing");
      expect(result.error).toContain("'ep-no-such-cli' was not found");
      const check = await registry.get(kind).check(fixtureEnv());
      expect(check.ok).toBe(false);
    },
  );

  it("is looked up on the run's PATH, not the daemon's", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec } = await makeSpec({ env: { PATH: "/usr/bin:/bin" } });
    const result = await registry.start("vendorB", spec).result;
    expect(result).toMatchObject({ ok: false, errorCode: "runtime_missing" });
    expect(await registry.get("vendorB").check(fixtureEnv())).toMatchObject({
      ok: true,
      detail: expect.stringMatching(/fixtures\/codex$/),
    });
  });
});
