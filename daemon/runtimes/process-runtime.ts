// The one-shot runner behind vendorA_code, vendorB, vendorC and shell: one child per run in its
// own process group, no TTY, stdout read as JSON lines by the vendor's stream parser.
import { runEnv } from "./runtime.js";
import { stripAnsi } from "./tmux.js";
import { statSync } from "node:fs";
import { isAbsolute } from "node:path";
import type { Clock, ClockTimer } from "../../common/clock.js";
import { EpError, invalidField, type ErrorCode } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import {
  createLineSplitter,
  createTailBuffer,
  fillArgs,
  liveGroupMembers,
  resolveExecutable,
  terminateGroup,
} from "./process-group.js";
import type {
  CommandLine,
  ProgressFrame,
  RunHandle,
  RunResult,
  RunSpec,
  RunUsage,
  RuntimeAdapter,
  RuntimeCheck,
  RuntimeKind,
} from "./runtime.js";
import type { CommandRuntimeConfig } from "./runtimes-config.js";
import { confineCommand, type Permission } from "./confine.js";
import type { Denial } from "./denials.js";
import { openSpool, wrapCommand } from "./run-record.js";
import { spawnHere, type SpawnFn } from "./spawner.js";

/** What a vendor's JSON-lines stream said; `final` is set once its closing event was seen. */
export interface StreamOutcome {
  final: boolean;
  ok: boolean;
  output: string;
  error?: string;
  usage?: RunUsage;
  /** tool calls the agent was refused, as the stream said so far */
  denials?: Denial[];
}

/** Turns one vendor CLI's JSON events into frames and remembers the outcome. One per run. */
export interface StreamParser {
  event(event: Record<string, unknown>): ProgressFrame[];
  /** What one stderr line means beyond itself (a retry becomes a status frame); the line is a `stderr` frame anyway. */
  stderr?(line: string): ProgressFrame[];
  outcome(): StreamOutcome;
}

export interface ProcessRuntimeOptions {
  kind: RuntimeKind;
  config: CommandRuntimeConfig;
  clock: Clock;
  logger: Logger;
  /**
   * Without a parser every stdout line is a text frame and the output is stdout itself. Gets the child's environment.
   */
  parser?: (env: Record<string, string>) => StreamParser;
  /** Returns an EpError when the spec cannot run on this runtime. */
  validate?: (spec: RunSpec) => EpError | undefined;
  /**
   * What this run adds to the configured command: the CLI's permission flags, EP's MCP tools, the task's settings
   * (vendorA_code's `input.claude`).
   */
  extend?: (spec: RunSpec, permission: Permission | undefined) => RunAdditions | EpError;
  /** Starts the process: epd's spawn helper (spawner.ts); Node's spawn from this process by default. */
  spawn?: SpawnFn;
}

/** Per-run additions to a runtime's configured command. */
export interface RunAdditions {
  /** Appended after the configured args. */
  args?: string[];
  /** Added to the child's environment; wins over the runtime's `env` table and the run's env. */
  env?: Record<string, string>;
  /** The run's timeout when the caller gave none (`RunSpec.timeoutMs`); 0 = none. */
  timeoutMs?: number;
}

/**
 * The output kept in memory: the tail a task's result holds (task-run.ts). More would be more than
 * memory: a tail of a megabyte, retained while megabytes stream through, made epd's heap grow by
 * ~30 MB (docs/perf-history.md, "Output of a run"); the whole output is in the spool.
 */
const OUTPUT_LIMIT = 64 * 1024;
const STDERR_TAIL = 4096;
/** A line longer than this goes on in pieces (frames and the kept tail), so output without newlines stays bounded. */
export const LINE_MAX = 16 * 1024;
/** How long after the leader's exit we wait for stragglers holding stdout before giving up on it. */
const DRAIN_MS = 2000;

export function templateValues(spec: RunSpec): Record<string, string> {
  const command = typeof spec.input.command === "string" ? spec.input.command : "";
  return { prompt: spec.prompt, command, task_id: spec.taskId, agent_id: spec.agentId, cwd: spec.cwd };
}

export function missingRuntime(kind: RuntimeKind, command: string): RunResult {
  // the code and message an EpError would carry, without an Error (and its stack) per failed run
  const code: ErrorCode = "runtime_missing";
  return {
    ok: false,
    output: "",
    error:
      `runtime ${kind}: executable '${command}' was not found on this ` +
      `node's PATH; install it or set [${kind}].command in runtimes.toml`,
    errorCode: code,
  };
}

export function checkCommand(
  kind: RuntimeKind,
  command: string,
  env: Record<string, string | undefined>,
): Promise<RuntimeCheck> {
  const path = resolveExecutable(command, env);
  return Promise.resolve(
    path ? { ok: true, detail: path } : { ok: false, detail: missingRuntime(kind, command).error! },
  );
}

/** The run's cwd must be an existing absolute directory (a spawn there would fail as ENOENT). */
export function checkCwd(spec: RunSpec): EpError | undefined {
  if (!isAbsolute(spec.cwd)) return invalidField("cwd", `must be an absolute path, got '${spec.cwd}'`);
  try {
    if (statSync(spec.cwd).isDirectory()) return undefined;
  } catch {
    // fall through
  }
  return invalidField("cwd", `'${spec.cwd}' is not an existing directory`);
}

/** A handle for a run that ended before it started (bad input, missing binary). */
export function settledHandle(result: RunResult): RunHandle {
  const done = Promise.resolve(result);
  return { pid: undefined, result: done, cancel: () => done };
}

export function createProcessRuntime(opts: ProcessRuntimeOptions): RuntimeAdapter {
  const { kind, config } = opts;
  return {
    kind,
    check: (env = process.env) => checkCommand(kind, config.command, env),
    commandLine: (spec) => commandLine(opts, spec),
    start(spec) {
      const cli = commandLine(opts, spec);
      if ("failed" in cli) return settledHandle(cli.failed);
      const { permission } = cli;
      const line = confineCommand({
        permission,
        cwd: spec.cwd,
        places: spec.places,
        env: cli.env,
        command: [cli.executable, ...cli.args],
      });
      if (line instanceof EpError)
        return settledHandle({
          ok: false,
          output: "",
          error: `runtime ${kind}: ${line.message}`,
          errorCode: line.code,
        });
      if (permission === "unconfined") {
        opts.logger.info('run unconfined: permission = "unconfined"', { runtime: kind, task_id: spec.taskId });
        spec.onFrame({
          kind: "status",
          text: 'permission "unconfined": the agent\'s process is not confined to its workspace',
          data: { permission },
        });
      }
      // the run's own wrapper, outside its confinement, writes its exit status where a restarted epd finds it
      const command = spec.record?.exit ? wrapCommand(spec.record.exit, line) : line;
      return runProcess({
        ...opts,
        spec,
        env: cli.env,
        executable: command[0]!,
        args: command.slice(1),
        timeoutMs: cli.timeoutMs,
      });
    },
  };
}

/**
 * The CLI command a run of this runtime spawns for `spec`, before its confinement (bubblewrap,
 * by `permission`) wraps it; or why the run cannot start. `start` runs exactly this, confined;
 * bench/agent-overhead.ts runs it directly to measure what EP adds around it.
 */
export function commandLine(opts: ProcessRuntimeOptions, spec: RunSpec): CommandLine | { failed: RunResult } {
  const { kind, config } = opts;
  const invalid = checkCwd(spec) ?? opts.validate?.(spec);
  if (invalid) return { failed: { ok: false, output: "", error: invalid.message, errorCode: invalid.code } };
  const permission = spec.permission ?? config.permission;
  const extra = opts.extend?.(spec, permission) ?? {};
  if (extra instanceof EpError)
    return { failed: { ok: false, output: "", error: extra.message, errorCode: extra.code } };
  const env = { ...runEnv(config.env, spec.env), ...extra.env };
  const executable = resolveExecutable(config.command, env, spec.cwd);
  if (!executable) return { failed: missingRuntime(kind, config.command) };
  const args = [...fillArgs(config.args, templateValues(spec)), ...(extra.args ?? [])];
  const timeoutMs = spec.timeoutMs ?? extra.timeoutMs ?? config.timeoutSeconds * 1000;
  return { executable, args, env, timeoutMs, ...(permission ? { permission } : {}) };
}

interface RunProcessOptions extends ProcessRuntimeOptions, Omit<CommandLine, "permission"> {
  spec: RunSpec;
}

function runProcess(o: RunProcessOptions): RunHandle {
  const { spec, clock } = o;
  const log = o.logger.child({ runtime: o.kind, task_id: spec.taskId });
  const graceMs = o.config.killGraceSeconds * 1000;
  const timeoutMs = o.timeoutMs;
  const parser = o.parser?.(o.env);
  const rawOutput = createTailBuffer(OUTPUT_LIMIT);
  const stderrTail = createTailBuffer(STDERR_TAIL);
  const emit = (frame: ProgressFrame) => {
    try {
      spec.onFrame(frame);
    } catch (err) {
      log.warn("progress frame handler threw", { error: (err as Error).message });
    }
  };

  let stopReason: { kind: "cancelled" | "timeout"; message: string } | undefined;
  let spawnError: NodeJS.ErrnoException | undefined;
  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  let timeoutTimer: ClockTimer | undefined;
  let terminating: Promise<void> | undefined;
  let resolveResult!: (r: RunResult) => void;
  const result = new Promise<RunResult>((r) => (resolveResult = r));

  const child = (o.spawn ?? spawnHere)(o.executable, o.args, { cwd: spec.cwd, env: o.env });
  // the leader's pid, once the process is there (at once from Node's spawn, a message later from the helper's)
  let pid = child.pid;
  let stopWhenStarted = false;
  const spawned = new Promise<number | undefined>((resolve) => {
    if (pid !== undefined) return resolve(pid);
    child.on("spawn", () => {
      pid = child.pid;
      log.debug("run started", { pid, command: o.executable });
      resolve(pid);
      if (stopWhenStarted) void terminate();
    });
    child.on("error", () => resolve(undefined));
  });
  if (pid !== undefined) log.debug("run started", { pid, command: o.executable });

  const terminate = () => {
    if (pid === undefined) {
      // not started yet: stopped as soon as it is
      stopWhenStarted = true;
      return result.then(() => undefined);
    }
    terminating ??= terminateGroup(pid, graceMs, clock);
    return terminating;
  };

  // the output is redacted as it comes (a secret cut across two reads is still found), before it
  // is spooled, kept or sent: nothing unredacted leaves the run's pipes
  const stdoutRedactor = spec.redactStream?.();
  const stderrRedactor = spec.redactStream?.();
  const spool =
    spec.record &&
    openSpool(spec.record.output, (err) =>
      log.warn("output spool not written; the run goes on without it", { error: err.message }),
    );
  const stdoutLines = createLineSplitter((line, whole) => {
    if (parser && whole) {
      const event = parseJsonObject(line);
      if (event) {
        for (const frame of parser.event(event)) emit(frame);
        return;
      }
    }
    if (parser) rawOutput.append(whole ? line + "\n" : line);
    if (line.length > 0) emit({ kind: "text", text: line });
  }, LINE_MAX);
  const stderrLines = createLineSplitter((line, whole) => {
    stderrTail.append(whole ? line + "\n" : line);
    if (line.length === 0) return;
    emit({ kind: "stderr", text: line });
    for (const frame of parser?.stderr?.(line) ?? []) emit(frame);
  }, LINE_MAX);
  // without a parser the output is stdout itself, kept a read at a time (not a line at a time: a
  // string per line is garbage by the million for a chatty command), line ends as the lines had them
  const stdout = (text: string) => {
    spool?.write(text);
    if (!parser && text) rawOutput.append(text.includes("\r") ? text.replace(/\r\n/g, "\n") : text);
    stdoutLines.push(text);
  };
  child.stdout!.setEncoding("utf8").on("data", (c: string) => stdout(stdoutRedactor ? stdoutRedactor.push(c) : c));
  child
    .stderr!.setEncoding("utf8")
    .on("data", (c: string) => stderrLines.push(stderrRedactor ? stderrRedactor.push(c) : c));

  let settled = false;
  const finish = async () => {
    if (settled) return;
    settled = true;
    if (timeoutTimer) clock.clearTimeout(timeoutTimer);
    if (stdoutRedactor) stdout(stdoutRedactor.end());
    if (stderrRedactor) stderrLines.push(stderrRedactor.end());
    stdoutLines.end();
    stderrLines.end();
    spool?.close();
    const kept = parser ? "" : rawOutput.text();
    if (kept && !kept.endsWith("\n")) rawOutput.append("\n"); // as a last line without its end always was
    // The leader is gone; anything it left behind in its group is an orphan of this run.
    if (pid !== undefined && liveGroupMembers(pid).length > 0) await terminate();
    else if (terminating) await terminating;
    const r = buildResult();
    log.debug("run finished", { pid, ok: r.ok, exit_code: r.exitCode, error: r.error });
    resolveResult(r);
  };

  const buildResult = () =>
    resultOf(o, {
      outcome: parser?.outcome(),
      rawOutput: rawOutput.text(),
      stderr: stderrTail.text(),
      exit,
      spawnError,
      stopReason,
    });

  child.on("error", (err: NodeJS.ErrnoException) => {
    spawnError = err;
    void finish();
  });
  child.on("exit", (code, signal) => {
    exit = { code, signal };
    // Stragglers of the group may hold stdout open; end them, and stop waiting for them after a while.
    if (pid !== undefined && liveGroupMembers(pid).length > 0) void terminate();
    clock.setTimeout(() => {
      child.stdout?.destroy();
      child.stderr?.destroy();
      void finish();
    }, graceMs + DRAIN_MS);
  });
  child.on("close", () => void finish());

  if (timeoutMs > 0) {
    timeoutTimer = clock.setTimeout(() => {
      if (settled || stopReason) return;
      stopReason = {
        kind: "timeout",
        message: `runtime ${o.kind}: timed out after ${formatSeconds(timeoutMs)}; the process group was killed`,
      };
      log.info("run timed out", { pid });
      void terminate();
    }, timeoutMs);
  }

  return {
    get pid() {
      return pid;
    },
    spawned,
    result,
    cancel(reason) {
      if (!settled && !stopReason) {
        stopReason = { kind: "cancelled", message: `cancelled${reason ? `: ${reason}` : ""}` };
        log.info("run cancelled", { pid, reason });
        void terminate();
      }
      return result;
    },
  };
}

/** A finished run's result: the parser's outcome when it has one, else the exit status, stderr and output. */
function resultOf(
  o: RunProcessOptions,
  x: {
    outcome: ReturnType<StreamParser["outcome"]> | undefined;
    rawOutput: string;
    stderr: string;
    exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    spawnError: NodeJS.ErrnoException | undefined;
    stopReason: { kind: "cancelled" | "timeout"; message: string } | undefined;
  },
): RunResult {
  const output = x.outcome && (x.outcome.final || x.outcome.output) ? x.outcome.output : x.rawOutput;
  const base: RunResult = {
    ok: false,
    output,
    ...(x.outcome?.usage ? { usage: x.outcome.usage } : {}),
    ...(x.outcome?.denials?.length ? { denials: x.outcome.denials } : {}),
  };
  if (x.exit?.code !== null && x.exit?.code !== undefined) base.exitCode = x.exit.code;
  if (x.exit?.signal) base.signal = x.exit.signal;
  if (x.spawnError) {
    if (x.spawnError.code === "ENOENT") return { ...missingRuntime(o.kind, o.config.command), output };
    return { ...base, error: `runtime ${o.kind}: could not start '${o.executable}': ${x.spawnError.message}` };
  }
  if (x.stopReason?.kind === "cancelled") return { ...base, cancelled: true, error: x.stopReason.message };
  if (x.stopReason?.kind === "timeout") return { ...base, timedOut: true, error: x.stopReason.message };
  const exitedOk = x.exit?.code === 0;
  // a CLI's colours (gemini's error text) are for terminals, not for a task's error
  const stderr = stripAnsi(x.stderr).trim();
  const exitText = x.exit?.signal ? `was killed by ${x.exit.signal}` : `exited with code ${x.exit?.code}`;
  if (x.outcome?.final) {
    if (x.outcome.ok && exitedOk) return { ...base, ok: true };
    return { ...base, error: x.outcome.error ?? `${o.kind} ${exitText}${stderr ? `: ${stderr}` : ""}` };
  }
  if (exitedOk) return { ...base, ok: true };
  return { ...base, error: x.outcome?.error ?? `${o.kind} ${exitText}${stderr ? `: ${stderr}` : ""}` };
}

export function parseJsonObject(line: string): Record<string, unknown> | undefined {
  const trimmed = line.trim();
  if (!trimmed.startsWith("{")) return undefined;
  try {
    const value: unknown = JSON.parse(trimmed);
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

export function formatSeconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${(ms / 1000).toFixed(1)} s`;
}

/** Shortens tool inputs and outputs so a frame stays a line, not a file. */
export function clip(text: string, max = 500): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

export function asString(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

export function asRecord(value: unknown): Record<string, unknown> | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}
