import { mkdtemp, mkdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EpError } from "../../common/errors.js";
import {
  defaultRuntimesConfig,
  lineOf,
  loadRuntimesConfig,
  parseRuntimesConfig,
  runtimesConfigPath,
} from "./runtimes-config.js";

function parseError(text: string): EpError {
  try {
    parseRuntimesConfig(text, "runtimes.toml");
  } catch (err) {
    expect(err).toBeInstanceOf(EpError);
    return err as EpError;
  }
  throw new Error("expected the config to be refused");
}

describe("runtimes.toml", () => {
  it("a missing file gives the documented defaults", async () => {
    const home = await mkdtemp(join(tmpdir(), "ep-home-"));
    const config = await loadRuntimesConfig(runtimesConfigPath({ EP_HOME: home }));
    expect(config.source).toBeUndefined();
    expect(config.vendorA_code.command).toBe("claude");
    expect(config.vendorA_code.args).toEqual(["-p", "{prompt}", "--output-format", "stream-json", "--verbose"]);
    expect(config.vendorA_agent_acp.command).toBe("claude-code-acp");
    // agents work in their workspace, confined; the shell runtime runs as it always did
    for (const kind of ["vendorA_code", "vendorA_agent_acp", "vendorB", "vendorC", "muxhost_hosted"] as const)
      expect(config[kind].permission).toBe("workspace");
    expect(config.shell.permission).toBeUndefined();
    // the defaults work in epd's scratch work directory (issue 15): codex outside a git repository,
    // gemini in a folder it was not told to trust
    expect([config.vendorB.command, ...config.vendorB.args]).toEqual([
      "codex",
      "exec",
      "--json",
      "--skip-git-repo-check",
      "{prompt}",
    ]);
    expect([config.vendorC.command, ...config.vendorC.args]).toEqual(["gemini", "-p", "{prompt}", "-o", "stream-json"]);
    expect(config.vendorC.env).toEqual({ GEMINI_CLI_TRUST_WORKSPACE: "true" });
    expect([config.shell.command, ...config.shell.args]).toEqual(["bash", "-c", "{command}"]);
    expect(config.muxhost_hosted.socketName).toBeUndefined();
  });

  it("reads $EP_HOME/epd/runtimes.toml over the defaults", async () => {
    const home = await mkdtemp(join(tmpdir(), "ep-home-"));
    await mkdir(join(home, "epd"));
    await writeFile(
      join(home, "epd", "runtimes.toml"),
      [
        "[vendorA_code]",
        'args = ["-p", "{prompt}", "--output-format", "stream-json", "--verbose", "--model", "opus"]',
        "timeout_seconds = 600",
        "",
        "[vendorA_agent_acp]",
        'command = "/opt/acp/agent"',
        'permission = "read-only"',
        'env = { ACP_LOG = "debug" }',
        "",
        "[muxhost_hosted]",
        'socket_name = "ep"',
        "poll_interval_ms = 100",
        'task_args = ["-c", "{command}"]',
      ].join("\n"),
    );
    const path = runtimesConfigPath({ EP_HOME: home });
    const config = await loadRuntimesConfig(path);
    expect(config.source).toBe(path);
    expect(config.vendorA_code.args.at(-1)).toBe("opus");
    expect(config.vendorA_code.timeoutSeconds).toBe(600);
    expect(config.vendorA_code.command).toBe("claude");
    expect(config.vendorA_agent_acp).toMatchObject({ command: "/opt/acp/agent", permission: "read-only" });
    // a file's env adds to the defaults' env (IS_SANDBOX cleared for claude-code-acp as root)
    expect(config.vendorA_agent_acp.env).toEqual({
      IS_SANDBOX: "",
      GEMINI_CLI_TRUST_WORKSPACE: "true",
      ACP_LOG: "debug",
    });
    expect(config.muxhost_hosted).toMatchObject({
      socketName: "ep",
      pollIntervalMs: 100,
      taskArgs: ["-c", "{command}"],
    });
    expect(config.vendorB).toEqual(defaultRuntimesConfig().vendorB);
  });

  it("an env table keeps the defaults' variables unless it sets them", () => {
    const config = parseRuntimesConfig(
      '[vendorC.env]\nGEMINI_API_KEY = "k"\n[vendorA_agent_acp.env]\nIS_SANDBOX = "1"\n',
    );
    expect(config.vendorC.env).toEqual({ GEMINI_CLI_TRUST_WORKSPACE: "true", GEMINI_API_KEY: "k" });
    expect(config.vendorA_agent_acp.env).toEqual({ IS_SANDBOX: "1", GEMINI_CLI_TRUST_WORKSPACE: "true" });
  });

  it("an unknown key is refused with its name and line", () => {
    const err = parseError(["[vendorB]", 'command = "codex"', "", "[vendorC]", 'comand = "gemini"'].join("\n"));
    expect(err.code).toBe("invalid_argument");
    expect(err.message).toContain("runtimes.toml:5: vendorC.comand: unknown key");
    expect(err.details).toMatchObject({ field: "vendorC.comand", line: 5 });
  });

  it("an unknown runtime table is refused with its line", () => {
    const err = parseError(['[shell]\ncommand = "bash"\n\n[vendorD]\ncommand = "x"'].join("\n"));
    expect(err.message).toContain("runtimes.toml:4: vendorD: unknown runtime 'vendorD'");
  });

  it("keys that belong to another runtime are unknown here", () => {
    const err = parseError("[vendorB]\npermission_timeout_seconds = 5\n");
    expect(err.message).toContain("runtimes.toml:2: vendorB.permission_timeout_seconds: unknown key");
  });

  it("wrong types are refused naming the key, and every problem is listed", () => {
    const err = parseError(
      [
        "[shell]",
        'args = "bash -c"',
        "timeout_seconds = -1",
        "[vendorA_agent_acp]",
        'permission = "yes"',
        "[muxhost_hosted]",
        'socket_name = "a b"',
      ].join("\n"),
    );
    expect(err.message).toContain("runtimes.toml:2: shell.args: must be an array of strings");
    expect(err.message).toContain("runtimes.toml:3: shell.timeout_seconds: must be a number >= 0");
    expect(err.message).toContain("runtimes.toml:5: vendorA_agent_acp.permission: must be one of");
    expect(err.message).toContain("runtimes.toml:7: muxhost_hosted.socket_name");
    expect((err.details as { errors: unknown[] }).errors).toHaveLength(4);
  });

  it('permission = "ask" with its timeout, for ACP agents and for claude -p; other values refused by runtime', () => {
    const config = parseRuntimesConfig(
      '[vendorA_agent_acp]\npermission = "ask"\npermission_timeout_seconds = 30\n[vendorA_code]\npermission ' +
        '= "ask"\n[vendorB]\npermission = "read-only"\n[shell]\npermission = "workspace"\n',
      "runtimes.toml",
    );
    expect(config.vendorA_agent_acp).toMatchObject({ permission: "ask", permissionTimeoutSeconds: 30 });
    expect(config.vendorA_code).toMatchObject({ permission: "ask", permissionTimeoutSeconds: 600 });
    expect(config.vendorB.permission).toBe("read-only");
    expect(config.shell.permission).toBe("workspace");
    const err = parseError(
      '[vendorA_code]\npermission = "allow_once"\npermission_timeout_seconds = ' +
        '0\n[vendorA_agent_acp]\npermission_timeout_seconds = 90000\n[vendorC]\npermission = "ask"\n',
    );
    // a policy of the old vocabulary says its new name
    expect(err.message).toContain(
      "runtimes.toml:2: vendorA_code.permission: 'allow_once' was renamed: " +
        'use "workspace" (must be one of workspace, ask, read-only, unconfined)',
    );
    expect(err.message).toContain(
      'runtimes.toml:7: vendorC.permission: "ask" works for vendorA_code and vendorA_agent_acp',
    );
    expect(err.message).toContain(
      "runtimes.toml:3: vendorA_code.permission_timeout_seconds: must be a number of seconds in (0, 86400]",
    );
    expect(err.message).toContain(
      "runtimes.toml:5: vendorA_agent_acp.permission_timeout_seconds: must be a number of seconds in (0, 86400]",
    );
  });

  it("bad TOML syntax is refused with line and column", () => {
    const err = parseError('[vendorA_code]\ncommand = = "claude"\n');
    expect(err.message).toMatch(/^runtimes\.toml:2:\d+: invalid TOML/);
    expect(err.details).toMatchObject({ line: 2 });
  });

  it("finds lines for dotted and inline spellings", () => {
    expect(lineOf('x = 1\nshell.comand = "a"\n', "shell", "comand")).toBe(2);
    expect(lineOf('\nvendorB = { command = "codex", bogus = 1 }\n', "vendorB", "bogus")).toBe(2);
    const err = parseError('vendorB = { command = "codex", bogus = 1 }\n');
    expect(err.message).toContain("runtimes.toml:1: vendorB.bogus: unknown key");
  });
});
