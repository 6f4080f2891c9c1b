// One Agent Client Protocol session with an agent subprocess, spoken through the official SDK
// over the child's stdio (newline-delimited JSON-RPC). The vendorA_agent_acp runtime opens one per
// task; long-running profile agents can keep one open and prompt it again.
import { spawn, type ChildProcess } from "node:child_process";
import { Readable, Writable } from "node:stream";
import {
  client,
  methods,
  ndJsonStream,
  PROTOCOL_VERSION,
  type ClientConnection,
  type McpServer,
  type SessionNotification,
  type StopReason,
} from "@agentclientprotocol/sdk";
import type { Clock } from "../../common/clock.js";
import { EpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import { createLineSplitter, createTailBuffer, resolveExecutable, terminateGroup } from "./process-group.js";
import { clip } from "./process-runtime.js";
import { usageOf, type ProgressFrame, type RunMcp, type RunSpec, type RunUsage } from "./runtime.js";
import { confineCommand, type Permission, type RunPlaces } from "./confine.js";
import { createDenialList, denialFrame, refusalIn, refusalLine, triedOf, type Denial } from "./denials.js";
import { answerPermission, toolNameOf } from "./acp-permission.js";

export interface AcpSessionOptions {
  command: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  permission: Permission;
  /** permission = "ask": a person decides (RunSpec.askPermission); without it "ask" rejects */
  askPermission?: RunSpec["askPermission"];
  permissionTimeoutMs?: number;
  /** A task's run: its process confined under this policy (confine.ts); a hosted session has none */
  confinement?: { permission: Permission | undefined; places?: RunPlaces };
  /** EP's tools, offered in session/new when the agent takes MCP over HTTP */
  mcp?: RunMcp;
  killGraceMs: number;
  clock: Clock;
  logger: Logger;
  onFrame(frame: ProgressFrame): void;
}

export interface AcpTurn {
  stopReason: StopReason;
  /** The agent's message text of this turn (its `agent_message_chunk` updates joined). */
  text: string;
  /** What the agent reported of its usage, when it did: tokens from the prompt response's `usage`
   * (ACP unstable), cost from the last `usage_update` (cumulative for the session; USD only). */
  usage?: RunUsage;
  /** the permission requests of this turn answered with a reject option (by the policy or a person) */
  denials: Denial[];
}

export interface AcpSession {
  /** the last lines the agent wrote to stderr (for error messages) */
  stderrTail(): string;
  readonly pid: number | undefined;
  readonly sessionId: string;
  /** Sends one prompt and resolves when the agent ends the turn. */
  prompt(text: string): Promise<AcpTurn>;
  /** Asks the agent to stop the current turn (`session/cancel`); the prompt then resolves `cancelled`. */
  cancelTurn(): Promise<void>;
  /** Closes the connection and ends the agent's process group. */
  close(): Promise<void>;
  /** Settles when the agent process exited, with a reason when it was not asked to. */
  readonly exited: Promise<string | undefined>;
}

/** Starts the agent, runs `initialize` and `session/new`; rejects with an EpError when it cannot. */
export async function openAcpSession(o: AcpSessionOptions): Promise<AcpSession> {
  const { child, executable } = spawnAgent(o);
  const log = o.logger.child({ runtime: "vendorA_agent_acp" });
  const pid = child.pid;
  const stderrTail = createTailBuffer(4096);
  const stderrLines = createLineSplitter((line) => {
    stderrTail.append(line + "\n");
    if (line) o.onFrame({ kind: "stderr", text: line });
  });
  child.stderr!.setEncoding("utf8").on("data", (c: string) => stderrLines.push(c));
  child.stdin!.on("error", () => {}); // EPIPE after the agent died; the exit handler reports it
  let closing = false;
  const exited = exitReason(
    child,
    executable,
    () => closing,
    () => {
      stderrLines.end();
      return stderrTail.text().trim();
    },
  );

  let turnText = "";
  let turnDenials = createDenialList();
  let costUsd: number | undefined;
  const emit = (frame: ProgressFrame) => {
    try {
      o.onFrame(frame);
    } catch (err) {
      log.warn("progress frame handler threw", { error: (err as Error).message });
    }
  };
  // pending "ask" permission requests end (cancelled) when the turn is cancelled or the session closes
  const asking = new AbortController();
  const calls = createCallLog();
  const app = client({ name: "epd" })
    .onRequest(methods.client.session.requestPermission, ({ params }) => {
      calls.asked(params.toolCall);
      return answerPermission(params, o, asking.signal, calls.names, emit, turnDenials);
    })
    .onNotification(methods.client.session.update, ({ params }) => {
      const frame = frameOfUpdate(params);
      const u = params.update;
      const refused = calls.update(u);
      const added = refused && turnDenials.add(refused);
      if (added) emit(denialFrame(added));
      if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") turnText += u.content.text;
      if (u.sessionUpdate === "usage_update" && u.cost && u.cost.currency.toUpperCase() === "USD")
        costUsd = u.cost.amount;
      if (frame) emit(frame);
    });

  const stream = ndJsonStream(
    Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>,
    Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>,
  );
  const connection: ClientConnection = app.connect(stream);
  let terminated: Promise<void> | undefined;
  const close = async () => {
    closing = true;
    asking.abort();
    connection.close();
    child.stdin!.end();
    if (pid !== undefined) terminated ??= terminateGroup(pid, o.killGraceMs, o.clock);
    await terminated;
  };

  const orExit = <T>(call: Promise<T>, what: string) => raceExit(call, what, exited, o.clock);

  let phase = "initialize";
  try {
    const init = await orExit(
      connection.agent.request(methods.agent.initialize, {
        protocolVersion: PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
        clientInfo: { name: "epd", version: "0.1.0" },
      }),
      "initialize",
    );
    emit({
      kind: "status",
      text: "agent initialized",
      data: { protocolVersion: init.protocolVersion, agentInfo: init.agentInfo ?? null },
    });
    phase = "session/new";
    const session = await orExit(
      connection.agent.request(methods.agent.session.new, {
        cwd: o.cwd,
        mcpServers: mcpServersFor(init.agentCapabilities?.mcpCapabilities?.http === true, o.mcp, emit),
      }),
      "session/new",
    );
    emit({ kind: "status", text: "session started", data: { sessionId: session.sessionId } });
    log.debug("acp session open", { pid, session_id: session.sessionId });

    return {
      pid,
      sessionId: session.sessionId,
      exited,
      close,
      stderrTail: () => stderrTail.text().trim(),
      async prompt(text) {
        turnText = "";
        turnDenials = createDenialList();
        const response = await orExit(
          connection.agent.request(methods.agent.session.prompt, {
            sessionId: session.sessionId,
            prompt: [{ type: "text", text }],
          }),
          "session/prompt",
        );
        const usage = promptUsage(response, costUsd);
        return {
          stopReason: response.stopReason,
          text: turnText,
          denials: turnDenials.list(),
          ...(usage ? { usage } : {}),
        };
      },
      async cancelTurn() {
        asking.abort(); // a permission request still before a person is answered "cancelled"
        // the agent may have exited already; the process group is killed after the grace period either way
        await connection.agent.notify(methods.agent.session.cancel, { sessionId: session.sessionId }).catch(() => {});
      },
    };
  } catch (err) {
    const stderr = stderrTail.text().trim();
    await close();
    if (err instanceof EpError) throw err;
    // orExit's own errors already name the phase; an agent's JSON-RPC error does not
    const text = acpErrorText(err, stderr);
    throw new EpError("internal", `runtime vendorA_agent_acp: ${text.startsWith(phase) ? text : `${phase}: ${text}`}`);
  }
}

/**
 * A request to a dead agent would wait forever, and one the closing connection rejects says only
 * "connection closed": races the call against the agent's exit and prefers its reason.
 */
async function raceExit<T>(
  call: Promise<T>,
  what: string,
  exited: Promise<string | undefined>,
  clock: Clock,
): Promise<T> {
  const died = exited.then((reason) => {
    throw new Error(`${what}: ${reason ?? "ACP agent exited"}`);
  });
  died.catch(() => {}); // raced against the request below, which reports it; this only keeps it from being "unhandled"
  try {
    return await Promise.race([call, died]);
  } catch (err) {
    const reason = await Promise.race([
      exited,
      new Promise<undefined>((r) => clock.setTimeout(() => r(undefined), 1000)),
    ]);
    throw reason ? new Error(`${what}: ${reason}`) : err;
  }
}

/** Settles when the agent exits: why, unless we were closing it (then undefined). */
function exitReason(
  child: ChildProcess,
  executable: string,
  closing: () => boolean,
  stderr: () => string,
): Promise<string | undefined> {
  return new Promise((resolve) => {
    child.on("error", (err) => resolve(`could not start '${executable}': ${err.message}`));
    child.on("exit", (code, signal) => {
      const tail = stderr();
      resolve(
        closing()
          ? undefined
          : `ACP agent ${signal ? `was killed by ${signal}` : `exited with code ${code}`}${tail ? `: ${tail}` : ""}`,
      );
    });
  });
}

/**
 * EP's tools for session/new: the run's HTTP door when the agent says it takes MCP over HTTP
 * (agentCapabilities.mcpCapabilities.http); an agent that does not is told nothing and the run
 * says so in a status frame (ACP's stdio servers would need a process per run again).
 */
function mcpServersFor(takesHttp: boolean, mcp: RunMcp | undefined, emit: (f: ProgressFrame) => void): McpServer[] {
  if (!mcp) return [];
  if (!takesHttp) {
    emit({
      kind: "status",
      text: "EP's tools not offered: this ACP agent does not take MCP servers over HTTP",
      data: { mcp: "unsupported" },
    });
    return [];
  }
  return [
    { type: "http", name: "ep", url: mcp.url, headers: [{ name: "Authorization", value: `Bearer ${mcp.token}` }] },
  ];
}

/** A turn's usage: the prompt response's tokens and the session's last reported cost. */
function promptUsage(response: unknown, costUsd: number | undefined) {
  const tokens = (
    response as { usage?: { inputTokens?: number; outputTokens?: number; cachedReadTokens?: number | null } | null }
  ).usage;
  return tokens || costUsd !== undefined
    ? usageOf({
        input: tokens?.inputTokens,
        output: tokens?.outputTokens,
        cached: tokens?.cachedReadTokens,
        cost: costUsd,
      })
    : undefined;
}

/** The agent's process: its executable found on the run's PATH, confined when the run is a task's. */
function spawnAgent(o: AcpSessionOptions): { child: ChildProcess; executable: string } {
  const executable = resolveExecutable(o.command, o.env, o.cwd);
  if (!executable) {
    throw new EpError(
      "runtime_missing",
      `runtime vendorA_agent_acp: executable '${o.command}' was not found on this ` +
        `node's PATH; install it or set [vendorA_agent_acp].command in runtimes.toml`,
    );
  }
  // a task's run is confined by its policy; a hosted session keeps its process as it is
  const c = o.confinement;
  const line = c
    ? confineCommand({
        permission: c.permission,
        cwd: o.cwd,
        ...(c.places ? { places: c.places } : {}),
        env: o.env,
        command: [executable, ...o.args],
      })
    : [executable, ...o.args];
  if (line instanceof EpError) throw new EpError(line.code, `runtime vendorA_agent_acp: ${line.message}`);
  return {
    child: spawn(line[0]!, line.slice(1), { cwd: o.cwd, env: o.env, detached: true, stdio: ["pipe", "pipe", "pipe"] }),
    executable,
  };
}

/** The session's tool calls as the agent announced them (name, input, title), for its denials. */
function createCallLog() {
  /** tool names by toolCallId, from the agent's tool_call updates (for "ask" requests that do not repeat them) */
  const names = new Map<string, string>();
  const calls = new Map<string, { input: unknown; title: string }>();
  return {
    names,
    /** gemini --acp announces a call only in its permission request */
    asked(tc: { toolCallId: string; rawInput?: unknown; title?: string | null }) {
      if (!calls.has(tc.toolCallId)) calls.set(tc.toolCallId, { input: tc.rawInput, title: tc.title ?? "" });
    },
    /**
     * Notes a call the agent announced; for one that ended, a refusal by the confinement (EROFS
     * and the like). A shell command that failed so may still be reported "completed" (gemini --acp).
     */
    update(u: SessionNotification["update"]): Denial | undefined {
      if (u.sessionUpdate === "tool_call") {
        const name = toolNameOf(u);
        if (name) names.set(u.toolCallId, name);
        calls.set(u.toolCallId, { input: u.rawInput, title: u.title });
        return undefined;
      }
      if (u.sessionUpdate !== "tool_call_update" || (u.status !== "failed" && u.status !== "completed"))
        return undefined;
      const call = calls.get(u.toolCallId);
      return sandboxRefusal(
        u,
        names.get(u.toolCallId) ?? u.kind ?? "tool",
        triedOf(call?.input) || (call?.title ?? u.title ?? ""),
      );
    },
  };
}

/** A failed tool call whose output says the sandbox stopped it, as a denial. */
function sandboxRefusal(
  u: { toolCallId: string; rawOutput?: unknown; content?: unknown },
  tool: string,
  tried: string,
): Denial | undefined {
  const text = outputText(u);
  if (refusalIn(text) !== "sandbox") return undefined;
  return { tool, tried, reason: refusalLine(text), source: "sandbox", callId: u.toolCallId };
}

/** What a tool call answered: its rawOutput, else the text of its content blocks (gemini --acp). */
function outputText(u: { rawOutput?: unknown; content?: unknown }): string {
  if (typeof u.rawOutput === "string") return u.rawOutput;
  if (u.rawOutput !== undefined && u.rawOutput !== null) return JSON.stringify(u.rawOutput);
  const blocks = Array.isArray(u.content) ? (u.content as { content?: { type?: string; text?: unknown } }[]) : [];
  return blocks
    .map((b) => (b.content?.type === "text" && typeof b.content.text === "string" ? b.content.text : ""))
    .join("\n");
}

function frameOfUpdate(n: SessionNotification): ProgressFrame | undefined {
  const u = n.update;
  switch (u.sessionUpdate) {
    case "agent_message_chunk":
      return u.content.type === "text"
        ? { kind: "text", text: u.content.text, data: { delta: true } }
        : { kind: "json", text: `agent sent ${u.content.type}`, data: { update: u } };
    case "agent_thought_chunk":
      return u.content.type === "text"
        ? { kind: "text", text: u.content.text, data: { thought: true, delta: true } }
        : undefined;
    case "user_message_chunk":
      return undefined;
    case "tool_call":
      return {
        kind: "tool",
        text: u.title,
        data: { phase: "call", toolCallId: u.toolCallId, toolKind: u.kind, status: u.status, rawInput: u.rawInput },
      };
    case "tool_call_update":
      return {
        kind: "tool",
        text: `${u.title ?? u.toolCallId}${u.status ? ` ${u.status}` : ""}`,
        data: {
          phase: "update",
          toolCallId: u.toolCallId,
          status: u.status,
          rawOutput: u.rawOutput === undefined || u.rawOutput === null ? undefined : clip(JSON.stringify(u.rawOutput)),
          ...(u.content?.length ? { content: clip(JSON.stringify(u.content)) } : {}),
        },
      };
    case "plan":
      return {
        kind: "status",
        text: `plan: ${u.entries.map((e) => e.content).join("; ")}`,
        data: { entries: u.entries },
      };
    case "usage_update":
      return {
        kind: "status",
        text: `context ${u.used}/${u.size} tokens${u.cost ? `, cost ${u.cost.amount} ${u.cost.currency}` : ""}`,
        data: { used: u.used, size: u.size, cost: u.cost ?? null },
      };
    default:
      return { kind: "json", text: u.sessionUpdate, data: { update: u } };
  }
}

/**
 * An ACP error as people need it: the JSON-RPC message ("Internal error") says little; the
 * agent's own words are in its data (`details`, `message`), and often in its stderr.
 */
export function acpErrorText(err: unknown, stderr: string): string {
  const e = err as { message?: string; data?: unknown };
  const parts = [e.message ?? String(err)];
  const data = e.data;
  if (typeof data === "string" && data) parts.push(data);
  else if (data && typeof data === "object") {
    const d = data as Record<string, unknown>;
    const said = d.details ?? d.message ?? d.error;
    parts.push(typeof said === "string" ? said : JSON.stringify(data).slice(0, 500));
  }
  let text = parts.filter(Boolean).join(": ");
  if (stderr && !text.includes(stderr)) text += ` (agent stderr: ${stderr.slice(-500)})`;
  return text;
}
