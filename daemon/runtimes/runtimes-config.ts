// runtimes.toml: which command each runtime kind runs. Every key is optional; a missing file or
// table means the documented defaults (docs/runtimes.md). A bad file is refused with every
// problem named by key and line, so the operator fixes it once.
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import { promisify } from "node:util";
import { join } from "node:path";
import { parse, TomlError } from "smol-toml";
import { EpError } from "../../common/errors.js";
import { DEFAULT_RUNTIME_COMMANDS as CMD } from "../../common/runtime-commands.js";
import { daemonHome } from "../../common/paths.js";
import { resolveExecutable } from "./process-group.js";
import { RUNTIME_KINDS, isRuntimeKind, type RuntimeKind } from "./runtime.js";

const execFileP = promisify(execFile);

import { findBwrap, isPermission, permissionProblem, type Permission } from "./confine.js";

/** The runtimes where a person can answer the agent's permission requests (permission = "ask"). */
export const ASKING_RUNTIMES: readonly RuntimeKind[] = ["vendorA_code", "vendorA_agent_acp"];

export interface CommandRuntimeConfig {
  /** Executable name (looked up on the run's PATH) or absolute path. */
  command: string;
  /** Arguments; `{prompt}`, `{command}`, `{task_id}`, `{agent_id}` and `{cwd}` are filled in per run. */
  args: string[];
  /**
   * Environment for the child: beats the daemon's inherited environment; EP_* run variables beat
   * it. A file's `env` table is merged over the defaults' key by key ("" clears a value).
   */
  env: Record<string, string>;
  /** Default run timeout when the task gives none; 0 disables it. */
  timeoutSeconds: number;
  /** Time between SIGTERM and SIGKILL of the process group on cancel or timeout. */
  killGraceSeconds: number;
  /**
   * What the agent may do (docs/runtimes.md "Permissions"): its CLI's own settings and the
   * bubblewrap confinement of its process. "workspace" for the agent runtimes; the shell runtime
   * has none unless set (its commands run as they always did).
   */
  permission: Permission | undefined;
  /** With permission = "ask": how long a person has to decide before the request is rejected (default 600). */
  permissionTimeoutSeconds: number;
}

export type AcpRuntimeConfig = CommandRuntimeConfig;

export interface MuxhostRuntimeConfig extends CommandRuntimeConfig {
  /** Arguments for a claimed task's run in a pane (`args` is for long-running hosted agents). */
  taskArgs: string[];
  /** tmux `-L` socket name; unset means the user's default tmux server. */
  socketName: string | undefined;
  /** How often a task's pane is checked for output and exit. */
  pollIntervalMs: number;
}

export type VendorACodeConfig = CommandRuntimeConfig;

export interface RuntimesConfig {
  vendorA_code: VendorACodeConfig;
  vendorA_agent_acp: AcpRuntimeConfig;
  vendorB: CommandRuntimeConfig;
  vendorC: CommandRuntimeConfig;
  muxhost_hosted: MuxhostRuntimeConfig;
  shell: CommandRuntimeConfig;
  /** The file the config came from, or undefined for the built-in defaults. */
  source: string | undefined;
}

export const PLACEHOLDERS = ["prompt", "command", "task_id", "agent_id", "cwd"] as const;

const COMMON = {
  env: {},
  timeoutSeconds: 3600,
  killGraceSeconds: 5,
  permission: "workspace" as Permission | undefined,
  permissionTimeoutSeconds: 600,
};
/** codex's log filter: errors, and one line per HTTP request (status and request id, no bodies). */
export const CODEX_RUST_LOG = "error,codex_http_client::client=debug";

export function defaultRuntimesConfig(): RuntimesConfig {
  return {
    // MCP_CONNECTION_NONBLOCKING=false: claude connects MCP servers in the background by default and
    // can send its first model request while `ep` is still pending; this makes it connect first.
    // CLAUDE_CODE_MAX_RETRIES=6: a failing model API is retried for about 40 s, not claude's 10 (about 4 min).
    // The permission flags (--permission-mode, --allowedTools) come from `permission` (vendor-a-code.ts)
    vendorA_code: {
      ...COMMON,
      env: { MCP_CONNECTION_NONBLOCKING: "false", CLAUDE_CODE_MAX_RETRIES: "6" },
      command: CMD.vendorA_code,
      args: ["-p", "{prompt}", "--output-format", "stream-json", "--verbose"],
    },
    // IS_SANDBOX="": claude-code-acp offers claude's bypass-permissions mode whenever IS_SANDBOX is
    // set, and claude refuses that mode as root unless it is exactly "1", so an ambient value
    // (e.g. IS_SANDBOX=yes) breaks every session as root. EP answers permission requests itself
    // (`permission`); set IS_SANDBOX = "1" here only on a sandboxed root node that wants bypass.
    // GEMINI_CLI_TRUST_WORKSPACE: when the ACP agent is `gemini --acp`, an untrusted folder turns its
    // MCP servers (EP's tools) off; the run's folder is EP's own, and confined
    vendorA_agent_acp: {
      ...COMMON,
      env: { IS_SANDBOX: "", GEMINI_CLI_TRUST_WORKSPACE: "true" },
      command: CMD.vendorA_agent_acp,
      args: [],
    },
    // --skip-git-repo-check: codex exec refuses to run outside a trusted git repository, and a
    // task's work directory is a fresh scratch folder
    // RUST_LOG: codex logs each HTTP request's status (it keeps only "high demand" of a 5xx), which
    // EP turns into retry status frames and the task's error
    vendorB: {
      ...COMMON,
      env: { RUST_LOG: CODEX_RUST_LOG },
      command: CMD.vendorB,
      args: ["exec", "--json", "--skip-git-repo-check", "{prompt}"],
    },
    // GEMINI_CLI_TRUST_WORKSPACE: gemini exits 55 in a folder it has not been told to trust
    vendorC: {
      ...COMMON,
      env: { GEMINI_CLI_TRUST_WORKSPACE: "true" },
      command: CMD.vendorC,
      args: ["-p", "{prompt}", "-o", "stream-json"],
    },
    muxhost_hosted: {
      ...COMMON,
      command: CMD.muxhost_hosted,
      args: [],
      taskArgs: ["-p", "{prompt}"],
      socketName: undefined,
      pollIntervalMs: 250,
    },
    shell: { ...COMMON, permission: undefined, command: CMD.shell, args: ["-c", "{command}"] },
    source: undefined,
  };
}

export function runtimesConfigPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(daemonHome(env), "runtimes.toml");
}

/** Reads `$EP_HOME/epd/runtimes.toml` (or `path`); a missing file gives the defaults. */
export async function loadRuntimesConfig(path: string = runtimesConfigPath()): Promise<RuntimesConfig> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return defaultRuntimesConfig();
    throw new EpError("invalid_argument", `${path}: cannot read: ${(err as Error).message}`, { file: path });
  }
  return parseRuntimesConfig(text, path);
}

interface ConfigProblem {
  key: string;
  line: number | undefined;
  message: string;
}

/** Parses runtimes.toml text over the defaults; throws one EpError listing every problem. */
export function parseRuntimesConfig(text: string, source = "runtimes.toml"): RuntimesConfig {
  let doc: Record<string, unknown>;
  try {
    doc = parse(text) as Record<string, unknown>;
  } catch (err) {
    if (err instanceof TomlError) {
      const first = err.message.split("\n")[0]?.replace(/^Invalid TOML document: /, "") ?? err.message;
      throw new EpError("invalid_argument", `${source}:${err.line}:${err.column}: invalid TOML: ${first}`, {
        file: source,
        line: err.line,
        column: err.column,
      });
    }
    throw err;
  }

  const config = defaultRuntimesConfig();
  config.source = source;
  const problems: ConfigProblem[] = [];
  const problem = (table: string, key: string | undefined, message: string) => {
    problems.push({ key: key ? `${table}.${key}` : table, line: lineOf(text, table, key), message });
  };

  for (const [table, value] of Object.entries(doc)) {
    if (!isRuntimeKind(table)) {
      problem(table, undefined, `unknown runtime '${table}' (known: ${RUNTIME_KINDS.join(", ")})`);
      continue;
    }
    if (!isPlainObject(value)) {
      problem(table, undefined, "must be a table");
      continue;
    }
    applyTable(config, table, value, (key, message) => problem(table, key, message));
  }

  if (problems.length > 0) {
    const lines = problems.map((p) => `${source}${p.line ? `:${p.line}` : ""}: ${p.key}: ${p.message}`);
    throw new EpError("invalid_argument", lines.join("\n"), {
      file: source,
      field: problems[0]!.key,
      line: problems[0]!.line,
      errors: problems,
    });
  }
  return config;
}

type Problem = (key: string, message: string) => void;

const COMMON_KEYS = ["command", "args", "env", "timeout_seconds", "kill_grace_seconds", "permission"];
const EXTRA_KEYS: Partial<Record<RuntimeKind, string[]>> = {
  vendorA_agent_acp: ["permission_timeout_seconds"],
  vendorA_code: ["permission_timeout_seconds"],
  muxhost_hosted: ["task_args", "socket_name", "poll_interval_ms"],
};

/** Why `value` is not a permission `kind` can take, or undefined when it is one. */
export function permissionRefusal(kind: RuntimeKind, value: unknown): string | undefined {
  if (!isPermission(value)) return permissionProblem(value);
  if (value === "ask" && !ASKING_RUNTIMES.includes(kind))
    return `"ask" works for ${ASKING_RUNTIMES.join(" and ")} (their CLIs ask EP); ${kind} has no way to ask a person`;
  return undefined;
}

function applyTable(config: RuntimesConfig, kind: RuntimeKind, table: Record<string, unknown>, problem: Problem): void {
  const allowed = [...COMMON_KEYS, ...(EXTRA_KEYS[kind] ?? [])];
  const target = config[kind] as CommandRuntimeConfig & Partial<AcpRuntimeConfig> & Partial<MuxhostRuntimeConfig>;
  for (const [key, value] of Object.entries(table)) {
    if (!allowed.includes(key)) {
      problem(key, `unknown key (allowed here: ${allowed.join(", ")})`);
      continue;
    }
    switch (key) {
      case "command":
        if (typeof value !== "string" || value.trim() === "") problem(key, "must be a non-empty string");
        else target.command = value;
        break;
      case "args":
      case "task_args":
        if (!Array.isArray(value) || !value.every((a) => typeof a === "string"))
          problem(key, "must be an array of strings");
        else if (key === "args") target.args = value as string[];
        else target.taskArgs = value as string[];
        break;
      case "env":
        if (!isPlainObject(value) || !Object.values(value).every((v) => typeof v === "string")) {
          problem(key, "must be a table of strings");
          // over the defaults' env, key by key
        } else target.env = { ...target.env, ...(value as Record<string, string>) };
        break;
      case "timeout_seconds":
      case "kill_grace_seconds":
        if (typeof value !== "number" || !Number.isFinite(value) || value < 0) problem(key, "must be a number >= 0");
        else if (key === "timeout_seconds") target.timeoutSeconds = value;
        else target.killGraceSeconds = value;
        break;
      case "permission_timeout_seconds":
        if (typeof value !== "number" || !Number.isFinite(value) || value <= 0 || value > 86_400)
          problem(key, "must be a number of seconds in (0, 86400]");
        else target.permissionTimeoutSeconds = value;
        break;
      case "permission": {
        const refused = permissionRefusal(kind, value);
        if (refused) problem(key, refused);
        else target.permission = value as Permission;
        break;
      }
      case "socket_name":
        if (typeof value !== "string" || !/^[A-Za-z0-9_.-]+$/.test(value)) {
          problem(key, "must be a name of letters, digits, '_', '.', '-'");
        } else target.socketName = value;
        break;
      case "poll_interval_ms":
        if (typeof value !== "number" || !Number.isInteger(value) || value < 1) problem(key, "must be an integer >= 1");
        else target.pollIntervalMs = value;
        break;
    }
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Date);
}

/**
 * Finds the 1-based line where `table` (or `table.key`) is written. smol-toml gives positions only
 * for syntax errors, so this scans the text for the usual spellings: a `[table]` header with
 * `key = …` below it, a dotted `table.key = …`, or an inline `table = { key = … }`.
 */
export function lineOf(text: string, table: string, key?: string): number | undefined {
  const lines = text.split(/\r?\n/);
  const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const name = (s: string) => `(?:${esc(s)}|"${esc(s)}"|'${esc(s)}')`;
  const header = new RegExp(`^\\s*\\[\\s*${name(table)}\\s*\\]`);
  const anyHeader = /^\s*\[/;
  const dotted = new RegExp(`^\\s*${name(table)}\\s*\\.\\s*${key ? name(key) : ""}`);
  const inlineTable = new RegExp(`^\\s*${name(table)}\\s*=`);
  const keyLine = key ? new RegExp(`^\\s*${name(key)}\\s*=`) : undefined;
  const inlineKey = key ? new RegExp(`[{,]\\s*${name(key)}\\s*=`) : undefined;
  let inTable = false;
  let atTop = true;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (anyHeader.test(line)) {
      atTop = false;
      inTable = header.test(line);
      if (inTable && !key) return i + 1;
      continue;
    }
    if (inTable && keyLine?.test(line)) return i + 1;
    if (atTop && dotted.test(line)) return i + 1;
    if (atTop && inlineTable.test(line) && (!inlineKey || inlineKey.test(line))) return i + 1;
  }
  return undefined;
}

/**
 * Each runtime as the daemon would run it: the executable found on the runs' PATH, what it says
 * to --version (3 s at most), and whether it is usable. `ep system doctor` asks this over
 * mgmt.sock, so it reports epd's view, not the PATH of the shell running `ep`.
 */
export async function runtimeReport(
  config: RuntimesConfig,
  env: Record<string, string>,
): Promise<{ kind: string; command: string; path: string; version: string; usable: boolean; detail: string }[]> {
  const out = [];
  for (const kind of RUNTIME_KINDS) {
    const c = config[kind];
    const path = resolveExecutable(c.command, env, process.cwd()) ?? "";
    let version = "";
    let detail = path ? `${path}` : `${c.command} is not on the runs' PATH (${env.PATH ?? ""})`;
    if (path) {
      const flag = kind === "muxhost_hosted" && basename(path) === "tmux" ? "-V" : "--version";
      try {
        const { stdout, stderr } = await execFileP(path, [flag], { env, timeout: 3000, maxBuffer: 64 * 1024 });
        version = (stdout || stderr).trim().split("\n")[0]?.slice(0, 200) ?? "";
      } catch (err) {
        detail = `${path} did not answer ${flag}: ${(err as Error).message.split("\n")[0]}`;
      }
    }
    out.push({ kind, command: c.command, path, version, usable: Boolean(path), detail });
  }
  // the confinement of agent runs (confine.ts): found on the runs' PATH, as a run would find it
  const bwrap = findBwrap(env);
  out.push(
    bwrap instanceof EpError
      ? {
          kind: "confinement",
          command: "bwrap",
          path: "",
          version: "",
          usable: false,
          detail: `bwrap is not on the runs' PATH (${env.PATH ?? ""})`,
        }
      : { kind: "confinement", command: "bwrap", path: bwrap, version: "", usable: true, detail: bwrap },
  );
  return out;
}
