// vendorA_agent_acp end to end against fixtures/claude-code-acp, a real ACP agent built on the
// official SDK: initialize, session/new, session/prompt, session updates, permission requests.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { RequestPermissionRequest } from "@agentclientprotocol/sdk";
import { decidePermission } from "./acp-permission.js";
import { gone, grandchildPid, makeSpec, testConfig, waitFor } from "./fixtures/harness.js";
import { createRuntimeRegistry, type RuntimeRegistry } from "./registry.js";

let registry: RuntimeRegistry;
afterEach(async () => {
  await registry?.close();
});

describe("vendorA_agent_acp", () => {
  it("runs one prompt turn: updates become frames, the message text is the output", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec, frames } = await makeSpec({ prompt: "write notes" });
    const handle = registry.start("vendorA_agent_acp", spec);
    const result = await handle.result;
    expect(result).toEqual({ ok: true, output: "Working on: write notes\nDone: write notes" });
    expect(frames.map((f) => `${f.kind}:${f.text}`)).toEqual([
      "status:agent initialized",
      "status:session started",
      "text:Working on: write notes\n",
      "status:plan: write notes.txt",
      `tool:Write ${join(spec.cwd, "notes.txt")}`,
      `status:permission allow: Write ${join(spec.cwd, "notes.txt")}`,
      "tool:call_1 completed",
      "text:Done: write notes",
    ]);
    expect(frames[0]?.data).toMatchObject({ agentInfo: { name: "fake-acp-agent" } });
    // The default policy allowed a write inside the run's own cwd, so the agent wrote it.
    expect(readFileSync(join(spec.cwd, "notes.txt"), "utf8")).toBe("notes for write notes\n");
    expect(gone(handle.pid!)).toBe(true);
  });

  it("the default policy rejects a tool call that touches files outside the cwd", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec, frames } = await makeSpec({ prompt: "[outside] write" });
    const result = await registry.start("vendorA_agent_acp", spec).result;
    expect(result.ok).toBe(true);
    expect(frames).toContainEqual(
      expect.objectContaining({ kind: "status", text: expect.stringMatching(/^permission reject:/) }),
    );
    expect(frames).toContainEqual(expect.objectContaining({ kind: "tool", text: "call_1 failed" }));
    expect(existsSync("/etc/ep-fake-acp-outside.txt")).toBe(false);
    // the rejection is the run's denial, and a status frame as it happens
    const denial = {
      tool: "edit",
      tried: "/etc/ep-fake-acp-outside.txt",
      reason: expect.stringContaining('permission = "workspace"'),
      source: "policy",
      callId: "call_1",
    };
    expect(result.denials).toEqual([denial]);
    expect(frames).toContainEqual({
      kind: "status",
      text: expect.stringMatching(/^refused \(policy\): edit \/etc\/ep-fake-acp-outside.txt/),
      data: { denial },
    });
  });

  it(
    "the default policy reads a real agent's rawInput: an edit outside " +
      "is rejected, inside allowed; another tool naming no path allowed",
    async () => {
      registry = createRuntimeRegistry(testConfig());
      const outside = await makeSpec({ prompt: "[real] [outside] write" });
      await registry.start("vendorA_agent_acp", outside.spec).result;
      expect(outside.frames).toContainEqual(expect.objectContaining({ kind: "tool", text: "call_1 failed" }));
      expect(existsSync("/etc/ep-fake-acp-outside.txt")).toBe(false);
      const inside = await makeSpec({ prompt: "[real] write" });
      await registry.start("vendorA_agent_acp", inside.spec).result;
      expect(readFileSync(join(inside.spec.cwd, "notes.txt"), "utf8")).toBe("notes for [real] write\n");
      const nopath = await makeSpec({ prompt: "[nopath] write" });
      await registry.start("vendorA_agent_acp", nopath.spec).result;
      // a tool of kind "other" (an MCP tool, say) changes no file the policy could check: the confinement holds it
      expect(nopath.frames).toContainEqual(
        expect.objectContaining({ kind: "status", text: expect.stringMatching(/^permission (?!reject)/) }),
      );
    },
  );

  it("an agent's failure carries its own message and stderr, not only 'Internal error'", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec } = await makeSpec({ prompt: "[throw] go" });
    const result = await registry.start("vendorA_agent_acp", spec).result;
    expect(result.ok).toBe(false);
    expect(result.error).toContain("the model API answered 529: overloaded");
    expect(result.error).toContain("agent stderr: fake-acp: calling the model failed");
  });

  it("usage: tokens from the prompt response, cost from the last usage_update", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec, frames } = await makeSpec({ prompt: "[usage] count" });
    const result = await registry.start("vendorA_agent_acp", spec).result;
    expect(result.ok, result.error).toBe(true);
    expect(result.usage).toEqual({
      input_tokens: 1200,
      output_tokens: 140,
      cached_input_tokens: 300,
      cost_usd: 0.0031,
      model: "",
    });
    expect(frames).toContainEqual(
      expect.objectContaining({ kind: "status", text: "context 900/200000 tokens, cost 0.0031 USD" }),
    );
  });

  it("a session that cannot start says which step failed, the agent's message and its stderr", async () => {
    const config = testConfig();
    config.vendorA_agent_acp.env = { FAKE_ACP_FAIL_SESSION_NEW: "1" };
    registry = createRuntimeRegistry(config);
    const { spec } = await makeSpec({ prompt: "go" });
    const result = await registry.start("vendorA_agent_acp", spec).result;
    expect(result.ok).toBe(false);
    expect(result.error).toMatch(/^runtime vendorA_agent_acp: session\/new: /);
    expect(result.error).toContain("Query closed before response received");
    expect(result.error).toContain("agent stderr: fake-acp: claude refused to start as root");
  });

  it('permission = "read-only" refuses an edit even inside the cwd', async () => {
    const config = testConfig();
    config.vendorA_agent_acp.permission = "read-only";
    registry = createRuntimeRegistry(config);
    const { spec } = await makeSpec({ prompt: "write" });
    const result = await registry.start("vendorA_agent_acp", spec).result;
    expect(existsSync(join(spec.cwd, "notes.txt"))).toBe(false);
    expect(result.denials).toEqual([
      expect.objectContaining({
        tried: join(spec.cwd, "notes.txt"),
        reason: 'refused by permission = "read-only"',
        source: "policy",
      }),
    ]);
  });

  it("a turn that stops for another reason than end_turn fails the run", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec } = await makeSpec({ prompt: "[refuse]" });
    const result = await registry.start("vendorA_agent_acp", spec).result;
    expect(result).toMatchObject({ ok: false, error: "vendorA_agent_acp: the agent stopped the turn: refusal" });
  });

  it("an agent that dies mid-turn fails the run with its exit code", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec } = await makeSpec({ prompt: "[crash]" });
    const result = await registry.start("vendorA_agent_acp", spec).result;
    expect(result.ok).toBe(false);
    expect(result.error).toContain("session/prompt: ACP agent exited with code 3");
  });

  it("an agent that is not an ACP agent fails with a clear reason", async () => {
    const config = testConfig();
    config.vendorA_agent_acp.command = "bash";
    config.vendorA_agent_acp.args = ["-c", "echo not acp >&2; exit 9"];
    registry = createRuntimeRegistry(config);
    const { spec } = await makeSpec({ prompt: "hi" });
    const result = await registry.start("vendorA_agent_acp", spec).result;
    expect(result.ok).toBe(false);
    expect(result.error).toContain("initialize: ACP agent exited with code 9: not acp");
  });

  it("cancel sends session/cancel; a cooperative agent ends the turn and its group is gone", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec, frames } = await makeSpec({ prompt: "[hang]" });
    const handle = registry.start("vendorA_agent_acp", spec);
    const grandchild = await waitFor(() => grandchildPid(frames));
    const result = await handle.cancel("stop");
    expect(result).toMatchObject({ ok: false, cancelled: true, error: "cancelled: stop" });
    expect(result.output).toContain("grandchild");
    expect(gone(handle.pid!)).toBe(true);
    expect(gone(grandchild)).toBe(true);
  });

  it("an agent that ignores session/cancel is killed with its group after the grace", async () => {
    registry = createRuntimeRegistry(testConfig());
    const { spec, frames } = await makeSpec({ prompt: "[hang] [stubborn]" });
    const handle = registry.start("vendorA_agent_acp", spec);
    const grandchild = await waitFor(() => grandchildPid(frames));
    const result = await handle.cancel();
    expect(result).toMatchObject({ ok: false, cancelled: true });
    expect(gone(handle.pid!)).toBe(true);
    expect(gone(grandchild)).toBe(true);
  });

  it("times out like the other runtimes", async () => {
    registry = createRuntimeRegistry(testConfig());
    // long enough for the fake agent (node + the ACP SDK) to start and print its grandchild on a
    // loaded machine: with 300 ms the timeout sometimes struck first and the pid never came
    const { spec, frames } = await makeSpec({ prompt: "[hang] [stubborn]", timeoutMs: 2000 });
    const handle = registry.start("vendorA_agent_acp", spec);
    const grandchild = await waitFor(() => grandchildPid(frames));
    const result = await handle.result;
    expect(result).toMatchObject({ ok: false, timedOut: true });
    expect(gone(grandchild)).toBe(true);
  });
});

describe("permission policy", () => {
  const request = (paths: string[]): RequestPermissionRequest => ({
    sessionId: "s",
    toolCall: { toolCallId: "t", kind: "edit", locations: paths.map((path) => ({ path })) },
    options: [
      { optionId: "once", name: "Allow once", kind: "allow_once" },
      { optionId: "always", name: "Always", kind: "allow_always" },
      { optionId: "no", name: "Reject", kind: "reject_once" },
    ],
  });
  const chosen = (r: ReturnType<typeof decidePermission>) =>
    r.outcome.outcome === "selected" ? r.outcome.optionId : "cancelled";

  it("workspace allows inside the cwd and rejects outside or via ..", () => {
    expect(chosen(decidePermission(request(["/w/run/a.txt", "b/c.txt"]), "workspace", "/w/run"))).toBe("once");
    // a request naming no path cannot be checked: rejected (it used to pass vacuously)
    expect(chosen(decidePermission(request([]), "workspace", "/w/run"))).toBe("no");
    expect(chosen(decidePermission(request(["/w/run/../x"]), "workspace", "/w/run"))).toBe("no");
    expect(chosen(decidePermission(request(["/w/runner/x"]), "workspace", "/w/run"))).toBe("no");
  });

  it("workspace reads the paths from rawInput, as real agents send them", () => {
    const raw = (rawInput: Record<string, unknown>): RequestPermissionRequest => ({
      ...request([]),
      toolCall: { toolCallId: "t", kind: "edit", rawInput },
    });
    const decide = (rawInput: Record<string, unknown>) =>
      chosen(decidePermission(raw(rawInput), "workspace", "/w/run"));
    expect(decide({ file_path: "/w/run/a.txt" })).toBe("once");
    expect(decide({ file_path: "/etc/passwd" })).toBe("no");
    expect(decide({ notebook_path: "/w/other/n.ipynb" })).toBe("no");
    expect(decide({ paths: ["a.txt", "/tmp/x"] })).toBe("no");
    expect(decide({ command: "ls -la" })).toBe("once"); // runs in the run's directory
    expect(decide({ command: "cat /etc/shadow" })).toBe("no");
    expect(decide({ command: "cat ../../secret" })).toBe("no");
    expect(decide({ command: "cat ~/.ssh/id_rsa" })).toBe("no");
    expect(decide({ command: "ls", cwd: "/" })).toBe("no");
    expect(decide({ content: "no path here" })).toBe("no");
    expect(decide({})).toBe("no");
  });

  it("workspace follows symlinks out of the run's directory", () => {
    const dir = mkdtempSync(join(tmpdir(), "ep-acp-perm-"));
    try {
      mkdirSync(join(dir, "run"));
      symlinkSync("/etc", join(dir, "run", "etc-link"));
      const req = {
        ...request([]),
        toolCall: {
          toolCallId: "t",
          kind: "edit" as const,
          rawInput: { file_path: join(dir, "run", "etc-link", "passwd") },
        },
      };
      expect(chosen(decidePermission(req, "workspace", join(dir, "run")))).toBe("no");
      const inside = {
        ...request([]),
        toolCall: {
          toolCallId: "t",
          kind: "edit" as const,
          rawInput: { file_path: join(dir, "run", "new", "file.txt") },
        },
      };
      expect(chosen(decidePermission(inside, "workspace", join(dir, "run")))).toBe("once");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it(
    "workspace allows commands, reads and other tools " + "anywhere (the confinement holds them), edits only inside",
    () => {
      const kind = (k: "execute" | "read" | "edit" | "delete" | "other", paths: string[]) => ({
        ...request(paths),
        toolCall: { ...request(paths).toolCall, kind: k },
      });
      expect(chosen(decidePermission(kind("other", []), "workspace", "/w/run"))).toBe("once");
      expect(chosen(decidePermission(kind("execute", ["/etc"]), "workspace", "/w/run"))).toBe("once");
      expect(chosen(decidePermission(kind("read", ["/etc/hosts"]), "workspace", "/w/run"))).toBe("once");
      expect(chosen(decidePermission(kind("edit", ["/etc/hosts"]), "workspace", "/w/run"))).toBe("no");
      expect(chosen(decidePermission(kind("delete", ["/w/run/a"]), "workspace", "/w/run"))).toBe("once");
    },
  );

  it("read-only allows reads only; unconfined prefers the always option; no matching option cancels", () => {
    const kind = (k: "execute" | "read" | "search" | "edit") => ({
      ...request(["/w/run/a"]),
      toolCall: { toolCallId: "t", kind: k, locations: [{ path: "/w/run/a" }] },
    });
    expect(chosen(decidePermission(kind("read"), "read-only", "/w/run"))).toBe("once");
    expect(chosen(decidePermission(kind("search"), "read-only", "/w/run"))).toBe("once");
    expect(chosen(decidePermission(kind("edit"), "read-only", "/w/run"))).toBe("no");
    expect(chosen(decidePermission(kind("execute"), "read-only", "/w/run"))).toBe("no");
    expect(chosen(decidePermission(request(["/etc/x"]), "unconfined", "/w"))).toBe("always");
    const onlyAllow = { ...request([]), options: [{ optionId: "once", name: "Allow", kind: "allow_once" as const }] };
    expect(chosen(decidePermission(onlyAllow, "read-only", "/w"))).toBe("cancelled");
    expect(chosen(decidePermission(kind("execute"), "ask", "/w"))).toBe("no");
  });
});
