// agents.toml: the node's long-running profile agents as `[[agent]]` tables. Parsed into
// FleetProfile values, or every error found, each with its line, like cron.toml.
import { permissionRefusal } from "../runtimes/runtimes-config.js";
import type { Permission } from "../runtimes/confine.js";
import { readFileSync } from "node:fs";
import { isAbsolute } from "node:path";
import { parse, TomlError } from "smol-toml";
import { EpError } from "../../common/errors.js";
import { isRuntimeKind, RUNTIME_KINDS, type RuntimeKind } from "../runtimes/runtime.js";
import { tmuxSessionName } from "../runtimes/tmux.js";

export interface FleetProfile {
  /** Stable id (1-64 of letters, digits, `_`, `.`, `-`); names the tmux session, unit and pid file. */
  id: string;
  /** Display name (default: the id). */
  name: string;
  runtime: RuntimeKind;
  /** tmux session name for muxhost_hosted (default: the id, sanitised for tmux). */
  session: string;
  /** Absolute working directory; absent means `$EP_HOME/epd/agents/<id>` (created). */
  cwd?: string;
  env: Record<string, string>;
  capabilities: string[];
  /** argv of the long-running process (muxhost_hosted pane, ACP agent, supervised service). */
  command?: string[];
  supervise: boolean;
  /** When set, the profile is enrolled at the tower in this domain (so the tower can signal it). */
  domain?: string;
  /** The repository its tasks work in, each in a worktree of its own, unless a task names one (docs/workspaces.md). */
  workspace?: string;
  /** What its tasks' agents may do, over the runtime's `permission` (docs/runtimes.md "Permissions"). */
  permission?: Permission;
  /** Line of the profile's `[[agent]]` header. */
  line: number;
}

export interface AgentsFileError {
  line: number;
  field?: string;
  /** The profile's id, or `#N` for the N-th table without one. */
  agent?: string;
  message: string;
}

export type AgentsFileResult = { ok: true; profiles: FleetProfile[] } | { ok: false; errors: AgentsFileError[] };

export const AGENT_FIELDS = [
  "id",
  "name",
  "runtime",
  "session",
  "cwd",
  "env",
  "capabilities",
  "command",
  "supervise",
  "domain",
  "workspace",
  "permission",
] as const;
const PROFILE_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Runtimes whose profile agent is a long-running process of its own when supervised. */
const ONE_SHOT: readonly RuntimeKind[] = ["vendorA_code", "vendorB", "vendorC", "shell"];

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

function findKeyLine(lines: string[], from: number, to: number, key: string): number | undefined {
  const k = escapeRegExp(key);
  const re = new RegExp(`^\\s*(?:${k}|"${k}"|'${k}')\\s*[=.]`);
  for (let n = from; n <= to && n <= lines.length; n++) if (re.test(lines[n - 1])) return n;
  return undefined;
}

/** `[[agent]]` headers and the lines each table spans (sub-tables such as `[agent.env]` belong to it). */
function scanBlocks(lines: string[]): { header: number; start: number; end: number }[] {
  const blocks: { header: number; start: number; end: number }[] = [];
  let current: (typeof blocks)[number] | undefined;
  let inString: string | undefined;
  lines.forEach((raw, i) => {
    const n = i + 1;
    for (const d of ['"""', "'''"]) {
      if (inString === d) {
        if ((raw.split(d).length - 1) % 2 === 1) inString = undefined;
        return;
      }
    }
    const t = raw.trim();
    if (/^\[\[\s*agent\s*\]\]\s*(#.*)?$/.test(t)) {
      if (current) current.end = n - 1;
      current = { header: n, start: n + 1, end: lines.length };
      blocks.push(current);
    } else if (t.startsWith("[") && !/^\[\s*agent\./.test(t)) {
      if (current) current.end = n - 1;
      current = undefined;
    }
    for (const d of ['"""', "'''"]) if ((raw.split(d).length - 1) % 2 === 1) inString = d;
  });
  return blocks;
}

/** Parses agents.toml text. Never throws: a bad file gives every error found. */
export function parseAgentsFile(text: string): AgentsFileResult {
  let doc: Record<string, unknown>;
  try {
    doc = parse(text) as Record<string, unknown>;
  } catch (err) {
    if (err instanceof TomlError) {
      return {
        ok: false,
        errors: [
          {
            line: err.line,
            message: `TOML syntax error: ${err.message.split("\n")[0].replace(/^Invalid TOML document:\s*/i, "")}`,
          },
        ],
      };
    }
    return { ok: false, errors: [{ line: 1, message: `cannot parse: ${String(err)}` }] };
  }
  const lines = text.split(/\r?\n/);
  const errors: AgentsFileError[] = [];
  for (const key of Object.keys(doc)) {
    if (key !== "agent")
      errors.push({
        line: findKeyLine(lines, 1, lines.length, key) ?? 1,
        field: key,
        message: `unknown top-level key "${key}"; agents.toml holds only [[agent]] tables`,
      });
  }
  const raw = doc.agent;
  if (raw === undefined) return errors.length ? { ok: false, errors } : { ok: true, profiles: [] };
  if (!Array.isArray(raw) || raw.some((a) => typeof a !== "object" || a === null || Array.isArray(a))) {
    errors.push({
      line: findKeyLine(lines, 1, lines.length, "agent") ?? 1,
      field: "agent",
      message: "agent must be an array of tables written as [[agent]]",
    });
    return { ok: false, errors };
  }
  const blocks = scanBlocks(lines);
  const aligned = blocks.length === raw.length;
  const profiles: FleetProfile[] = [];
  const seenIds = new Map<string, number>();
  const seenSessions = new Map<string, string>();

  raw.forEach((entry, index) => {
    const t = entry as Record<string, unknown>;
    const block = aligned ? blocks[index] : undefined;
    const header = block?.header ?? 1;
    const lineOf = (field: string) => (block && findKeyLine(lines, block.start, block.end, field)) || header;
    const id = typeof t.id === "string" && t.id ? t.id : undefined;
    const before = errors.length;
    const fail = (field: string, message: string) =>
      errors.push({ line: lineOf(field), field, agent: id ?? `#${index + 1}`, message });

    for (const key of Object.keys(t)) {
      if (!(AGENT_FIELDS as readonly string[]).includes(key))
        fail(key, `unknown field "${key}"; known fields: ${AGENT_FIELDS.join(", ")}`);
    }
    const str = (field: string): string | undefined => {
      const v = t[field];
      if (v === undefined) return undefined;
      if (typeof v !== "string") return void fail(field, `${field} must be a string`);
      if (!v.trim()) return void fail(field, `${field} must not be empty`);
      return v;
    };
    const strList = (field: string): string[] | undefined => {
      const v = t[field];
      if (v === undefined) return undefined;
      if (!Array.isArray(v) || v.some((x) => typeof x !== "string"))
        return void fail(field, `${field} must be a list of strings, e.g. ${field} = ["a", "b"]`);
      return v as string[];
    };

    if (t.id === undefined) fail("id", "id is required");
    else if (typeof t.id !== "string" || !PROFILE_ID.test(t.id))
      fail("id", "id must be 1-64 characters of letters, digits, '.', '_' or '-', starting with a letter or digit");
    else if (seenIds.has(t.id)) fail("id", `duplicate agent id "${t.id}" (first defined on line ${seenIds.get(t.id)})`);
    else seenIds.set(t.id, header);

    let runtime: RuntimeKind | undefined;
    if (t.runtime === undefined) fail("runtime", `runtime is required (one of ${RUNTIME_KINDS.join(", ")})`);
    else {
      const r = str("runtime");
      if (r !== undefined && !isRuntimeKind(r))
        fail("runtime", `runtime must be one of ${RUNTIME_KINDS.join(", ")}, not "${r}"`);
      else runtime = r as RuntimeKind | undefined;
    }
    const name = str("name");
    const sessionRaw = str("session");
    const session = sessionRaw !== undefined ? sessionRaw : id;
    if (sessionRaw !== undefined && tmuxSessionName(sessionRaw) !== sessionRaw) {
      fail("session", "session must be letters, digits, '_' or '-' (tmux session names cannot hold '.' or ':')");
    } else if (session && seenSessions.has(session)) {
      fail("session", `session "${session}" is already used by agent "${seenSessions.get(session)}"`);
    } else if (session && id) seenSessions.set(session, id);
    const cwd = str("cwd");
    if (cwd !== undefined && !isAbsolute(cwd)) fail("cwd", `cwd must be an absolute path, not "${cwd}"`);
    const domain = str("domain");
    const workspace = str("workspace")?.trim();
    if (workspace === "")
      fail("workspace", "workspace must name a workspace of workspaces.toml or be an absolute repository path");
    const permission = str("permission");
    if (permission !== undefined && runtime && isRuntimeKind(runtime)) {
      const refused = permissionRefusal(runtime, permission);
      if (refused) fail("permission", `permission "${permission}": ${refused}`);
    }
    const env = envTable(t.env, fail);
    const capabilities =
      strList("capabilities")
        ?.map((c) => c.trim())
        .filter(Boolean) ?? [];
    const command = strList("command");
    if (command !== undefined && (command.length === 0 || !command[0].trim()))
      fail("command", "command must be a non-empty list whose first item names an executable");

    let supervise = false;
    if (t.supervise !== undefined) {
      if (typeof t.supervise !== "boolean") fail("supervise", "supervise must be true or false");
      else supervise = t.supervise;
    }
    if (supervise && runtime && ONE_SHOT.includes(runtime) && command === undefined) {
      fail(
        "command",
        `a supervised ${runtime} agent needs command (the long-running process to keep alive, ` +
          `e.g. command = ["claude", "--resume"]); ${runtime} signals are one-shot runs otherwise`,
      );
    }

    if (errors.length > before || !id || !runtime) return;
    profiles.push({
      id,
      name: name ?? id,
      runtime,
      session: session ?? id,
      ...(cwd !== undefined ? { cwd } : {}),
      env,
      capabilities,
      ...(command !== undefined ? { command } : {}),
      supervise,
      ...(domain !== undefined ? { domain } : {}),
      ...(workspace ? { workspace } : {}),
      ...(permission !== undefined ? { permission: permission as Permission } : {}),
      line: header,
    });
  });
  errors.sort((a, b) => a.line - b.line || (a.field ?? "").localeCompare(b.field ?? ""));
  return errors.length ? { ok: false, errors } : { ok: true, profiles };
}

/** Reads agents.toml; a missing file means no profiles. */
export function readAgentsFile(path: string): AgentsFileResult {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { ok: true, profiles: [] };
    return { ok: false, errors: [{ line: 0, message: `cannot read ${path}: ${(err as Error).message}` }] };
  }
  return parseAgentsFile(text);
}

export function formatAgentsFileError(e: AgentsFileError): string {
  const where = [`line ${e.line}`, e.agent && `agent "${e.agent}"`, e.field && `field ${e.field}`]
    .filter(Boolean)
    .join(", ");
  return `${where}: ${e.message}`;
}

export function agentsFileError(path: string, errors: AgentsFileError[]): EpError {
  const n = errors.length;
  return new EpError(
    "config_invalid",
    `${path} has ${n} error${n === 1 ? "" : "s"}:\n${errors.map((e) => "  " + formatAgentsFileError(e)).join("\n")}`,
    { file: path, errors },
  );
}

/** A profile's `env` table: every key a variable name, every value a string (errors through `fail`). */
function envTable(raw: unknown, fail: (field: string, message: string) => void): Record<string, string> {
  const env: Record<string, string> = {};
  if (raw === undefined) return env;
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    fail("env", 'env must be a table of strings, e.g. env = { FOO = "bar" }');
    return env;
  }
  for (const [k, v] of Object.entries(raw as Record<string, unknown>)) {
    if (!ENV_KEY.test(k)) fail("env", `env key "${k}" is not a valid variable name`);
    else if (typeof v !== "string") fail("env", `env.${k} must be a string`);
    else env[k] = v;
  }
  return env;
}
