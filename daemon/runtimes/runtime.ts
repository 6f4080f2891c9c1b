// The one contract every runtime adapter satisfies. The task worker starts a run with a RunSpec,
// relays its progress frames to the tower, and reports the RunResult; it never needs to know
// which vendor CLI, ACP agent or tmux pane is behind the adapter.
import type { ErrorCode } from "../../common/errors.js";

export { RUNTIME_KINDS, isRuntimeKind, type RuntimeKind } from "../../common/runtimes.js";
import type { RuntimeKind } from "../../common/runtimes.js";
import type { Denial } from "./denials.js";
import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import { enumOf } from "../../common/vocab.js";
import { FrameKindSchema, type FrameKind, type ProgressFrameSchema } from "../../gen/ep/tower/v1/work_pb.js";
import type { Permission, RunPlaces } from "./confine.js";
import type { RunRecord } from "./run-record.js";

/** One unit of progress from a running agent; becomes a `progress` event upstream. */
export interface ProgressFrame {
  /**
   * `text`: agent prose or raw output; `tool`: a tool call or its result; `status`: lifecycle (and
   * model API retries); `json`: any other structured line; `stderr`: a line the process wrote to stderr.
   */
  kind: "text" | "tool" | "status" | "json" | "stderr";
  text: string;
  data?: Record<string, unknown>;
}

/** A frame as the contract's ProgressFrame (ReportProgress). */
export const frameMsg = (f: ProgressFrame): MessageInitShape<typeof ProgressFrameSchema> => ({
  kind: enumOf<FrameKind>(FrameKindSchema, f.kind, "kind"),
  text: f.text,
  data: f.data as JsonObject | undefined,
});

export interface RunSpec {
  taskId: string;
  agentId: string;
  /** What an agent runtime is asked to do (the worker picks input.prompt, else title and description). */
  prompt: string;
  /** The task's input object; the shell runtime runs `input.command`. */
  input: Record<string, unknown>;
  /** Absolute working directory of this run; created by the caller. */
  cwd: string;
  /** The complete environment of the child (the caller adds EP_SECRETS_SOCKET, EP_SECRETS_SESSION, PATH…). */
  env: Record<string, string>;
  /** Overrides the runtime's configured timeout; 0 means none. */
  timeoutMs?: number;
  /**
   * Overrides the runtime's `permission` (an agents.toml profile's own; checked against the runtime when the file was
   * read).
   */
  permission?: Permission;
  /** Where the run lives, for its confinement (confine.ts); without it the run's cwd is its only place. */
  places?: RunPlaces;
  /** EP's MCP tools for this run, served by the running epd (mcp-endpoint.ts); absent when it has none. */
  mcp?: RunMcp;
  onFrame(frame: ProgressFrame): void;
  /**
   * Where a one-shot process run spools its output and its wrapper writes its exit status
   * (run-record.ts); the other runtimes ignore it. Without it the output lives only as its tail in memory.
   */
  record?: RunRecord;
  /**
   * A fresh redactor for one stream of the run's output (the run's secrets), applied before the output is spooled, kept
   * or sent.
   */
  redactStream?(): { push(text: string): string; end(): string };
  /**
   * With permission = "ask": puts a tool-permission request before a person (a tower approval)
   * and resolves with their answer. Absent when the run has no tower to ask (then "ask" rejects).
   */
  askPermission?(ask: PermissionAsk, signal: AbortSignal): Promise<PermissionAnswer>;
}

/** A run's door to EP's tools: its URL, its bearer token, and the `mcpServers` file claude reads. */
export interface RunMcp {
  url: string;
  token: string;
  configFile: string;
}

export interface PermissionAsk {
  tool: string;
  title: string;
  arguments: Record<string, unknown>;
  paths: string[];
  options: { optionId: string; name: string; kind: string }[];
  /** how long a person has to decide */
  timeoutMs: number;
}

/** The option the person chose (an allow one when approved, a reject one otherwise), or none. */
export interface PermissionAnswer {
  approved: boolean;
  optionId?: string;
  approvalId: string;
  /** who decided, or why it was rejected ("expired", the reason given) */
  note: string;
}

export interface RunResult {
  ok: boolean;
  /** The agent's final answer (or the command's output for shell and tmux runs). */
  output: string;
  exitCode?: number;
  signal?: string;
  /** Why the run failed, in words an operator can act on. */
  error?: string;
  /** A catalog code when the failure has one (`runtime_missing`, `invalid_argument`). */
  errorCode?: ErrorCode;
  cancelled?: boolean;
  timedOut?: boolean;
  /** tokens and cost, when the CLI reports them */
  usage?: RunUsage;
  /** tool calls the agent was refused (denials.ts); absent or empty when none */
  denials?: Denial[];
}

export interface RunUsage {
  input_tokens: number;
  output_tokens: number;
  cached_input_tokens: number;
  cost_usd: number;
  model: string;
}

/** A RunUsage from loosely typed numbers (missing = 0). */
export function usageOf(u: {
  input?: unknown;
  output?: unknown;
  cached?: unknown;
  cost?: unknown;
  model?: unknown;
}): RunUsage {
  const n = (v: unknown) => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : 0);
  return {
    input_tokens: n(u.input),
    output_tokens: n(u.output),
    cached_input_tokens: n(u.cached),
    cost_usd: n(u.cost),
    model: typeof u.model === "string" ? u.model : "",
  };
}

export interface RunHandle {
  /** Leader of the run's process group, once known. */
  readonly pid: number | undefined;
  /** Settles with the leader's pid once it is known (undefined: the run did not start); absent where pid is at once. */
  readonly spawned?: Promise<number | undefined>;
  /** Settles once the run ended and its process group is gone; never rejects. */
  readonly result: Promise<RunResult>;
  /** Stops the run: the whole process group gets SIGTERM, then SIGKILL after the grace. Resolves with the result. */
  cancel(reason?: string): Promise<RunResult>;
}

export interface RuntimeCheck {
  ok: boolean;
  /** The executable that would run, or why there is none. */
  detail: string;
}

/**
 * The CLI a run starts, before its confinement: the executable (resolved on PATH), its argv after it, its complete
 * environment.
 */
export interface CommandLine {
  executable: string;
  args: string[];
  env: Record<string, string>;
  /** 0 = none */
  timeoutMs: number;
  /** the run's policy (the spec's, else the runtime's), which decides its confinement */
  permission?: Permission;
}

export interface RuntimeAdapter {
  readonly kind: RuntimeKind;
  /** Starts one run. Never throws: bad input and missing binaries come back as a failed RunResult. */
  start(spec: RunSpec): RunHandle;
  /** The one-shot CLI runtimes: the command `start` spawns for `spec`, without the confinement around it. */
  commandLine?(spec: RunSpec): CommandLine | { failed: RunResult };
  /** Whether the runtime's executable is present, for `ep system doctor`. */
  check(env?: Record<string, string | undefined>): Promise<RuntimeCheck>;
}

/**
 * The child's environment: the daemon's (inherited) environment, then runtimes.toml's `env`
 * (explicit configuration beats ambient environment: an inherited IS_SANDBOX=yes can be set to 1),
 * then the run's own EP_* variables (secrets session, task and agent ids), which no config may
 * change.
 */
export function runEnv(configured: Record<string, string>, run: Record<string, string>): Record<string, string> {
  const own: Record<string, string> = {};
  for (const [k, v] of Object.entries(run)) if (k.startsWith("EP_")) own[k] = v;
  return { ...run, ...configured, ...own };
}
