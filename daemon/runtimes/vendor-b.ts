// vendorB: `codex exec --json <prompt>`. Events: `thread.started`, `turn.started`,
// `item.started|updated|completed` carrying an item (agent_message, reasoning, command_execution,
// file_change, mcp_tool_call, web_search, todo_list, error), then `turn.completed` or
// `turn.failed`; a top-level `error` reports stream trouble ("Reconnecting... 2/5 (…)" while it
// retries). The last agent_message is the answer. The events name no model: it is read from the
// session's rollout file once the turn is over (codex-rollout.ts).
import { codexReconnect, codexRequestLine, retryFrame, upstreamMessage } from "./api-retry.js";
import { rolloutModel } from "./codex-rollout.js";
import { usageOf, type ProgressFrame, type RunSpec } from "./runtime.js";
import {
  asRecord,
  asString,
  clip,
  type RunAdditions,
  type StreamOutcome,
  type StreamParser,
} from "./process-runtime.js";
import { pick } from "./vendor-a-code.js";

/**
 * What one vendorB run adds: approvals off (nobody answers them in `codex exec`) and codex's own
 * sandbox off: it is bubblewrap too, and a user namespace inside EP's confinement cannot map its
 * ids without the capabilities the confinement drops ("setting up uid map: Operation not
 * permitted"), so its sandbox would refuse every command. EP's confinement (confine.ts) holds the
 * run to its workspace, or read-only, instead. And EP's tools as a streamable HTTP server whose
 * bearer token codex reads from EP_MCP_TOKEN.
 */
export function vendorBRun(spec: RunSpec): RunAdditions {
  const args = ["--sandbox", "danger-full-access", "-c", 'approval_policy="never"'];
  const env: Record<string, string> = {};
  if (spec.mcp) {
    args.push(
      "-c",
      `mcp_servers.ep.url=${JSON.stringify(spec.mcp.url)}`,
      "-c",
      'mcp_servers.ep.bearer_token_env_var="EP_MCP_TOKEN"',
    );
    env.EP_MCP_TOKEN = spec.mcp.token;
  }
  return { args, env };
}

/** `env`: the run's environment (where codex keeps its sessions: CODEX_HOME, else HOME/.codex). */
export function createVendorBParser(env: Record<string, string> = {}): StreamParser {
  const outcome: StreamOutcome = { final: false, ok: false, output: "" };
  let lastError: string | undefined;
  let threadId: string | undefined;
  let failedRequests = 0;
  /** The last failed HTTP request codex logged (its own message for a 5xx drops the upstream's). */
  let lastHttp: { status: number; text: string } | undefined;
  /** codex's message with the upstream's words: the body's message, else the status codex left out. */
  const failure = (message: string) => {
    const upstream = upstreamMessage(message);
    if (upstream !== message || !lastHttp || message.includes(String(lastHttp.status))) return upstream;
    return `${message} (upstream ${lastHttp.text})`;
  };

  const itemFrame = (phase: "started" | "completed", item: Record<string, unknown>): ProgressFrame | undefined => {
    const type = asString(item.type);
    const data = { phase, ...item };
    switch (type) {
      case "agent_message":
        if (phase !== "completed") return undefined;
        outcome.output = asString(item.text) ?? "";
        return { kind: "text", text: outcome.output };
      case "reasoning":
        return phase === "completed"
          ? { kind: "text", text: asString(item.text) ?? "", data: { reasoning: true } }
          : undefined;
      case "command_execution": {
        const command = asString(item.command) ?? "";
        if (phase === "started") return { kind: "tool", text: `$ ${command}`, data };
        const output = asString(item.aggregated_output) ?? "";
        return {
          kind: "tool",
          text: `$ ${command} → exit ${String(item.exit_code ?? "?")}`,
          data: { ...data, aggregated_output: clip(output) },
        };
      }
      case "file_change": {
        const changes = Array.isArray(item.changes) ? item.changes.map(asRecord) : [];
        const paths = changes.map((c) => `${asString(c?.kind) ?? "update"} ${asString(c?.path) ?? "?"}`);
        return phase === "completed" ? { kind: "tool", text: `files: ${paths.join(", ")}`, data } : undefined;
      }
      case "mcp_tool_call":
        return {
          kind: "tool",
          text: `${asString(item.server) ?? "mcp"}.${asString(item.tool) ?? "tool"} ${phase}`,
          data,
        };
      case "web_search":
        return { kind: "tool", text: `search: ${asString(item.query) ?? ""}`, data };
      case "todo_list":
        return { kind: "status", text: "plan updated", data };
      case "error":
        return { kind: "status", text: `warning: ${asString(item.message) ?? ""}`, data };
      default:
        return { kind: "json", text: `item ${type ?? "?"} ${phase}`, data };
    }
  };

  return {
    event(event) {
      const item = asRecord(event.item);
      switch (event.type) {
        case "thread.started":
          threadId = asString(event.thread_id);
          return [{ kind: "status", text: "thread started", data: pick(event, ["thread_id"]) }];
        case "turn.started":
          return [{ kind: "status", text: "turn started" }];
        case "item.started":
        case "item.completed": {
          if (!item) return [];
          const frame = itemFrame(event.type === "item.started" ? "started" : "completed", item);
          return frame ? [frame] : [];
        }
        case "item.updated":
          return item?.type === "todo_list" ? [{ kind: "status", text: "plan updated", data: item }] : [];
        case "turn.completed": {
          outcome.final = true;
          outcome.ok = true;
          const u = asRecord(event.usage);
          if (u)
            outcome.usage = usageOf({ input: u.input_tokens, output: u.output_tokens, cached: u.cached_input_tokens });
          return [{ kind: "status", text: "finished", data: pick(event, ["usage"]) }];
        }
        case "turn.failed": {
          outcome.final = true;
          outcome.ok = false;
          const message = failure(asString(asRecord(event.error)?.message) ?? lastError ?? "turn failed");
          outcome.error = `vendorB: ${message}`;
          return [{ kind: "status", text: `failed: ${message}`, data: pick(event, ["error", "usage"]) }];
        }
        case "error": {
          const retry = codexReconnect(asString(event.message) ?? "");
          if (retry) return [retryFrame(retry)];
          lastError = failure(asString(event.message) ?? "error");
          outcome.error = `vendorB: ${lastError}`;
          return [{ kind: "status", text: `error: ${lastError}`, data: event }];
        }
        default:
          return [{ kind: "json", text: String(event.type ?? "event"), data: event }];
      }
    },
    stderr(line) {
      const request = codexRequestLine(line);
      if (!request || request.status < 400) return [];
      failedRequests += 1;
      const text =
        `HTTP ${request.status}${request.reason ? ` ${request.reason}` : ""}` +
        `${request.requestId ? `, request id ${request.requestId}` : ""}`;
      lastHttp = { status: request.status, text };
      return [retryFrame({ attempt: failedRequests, status: request.status, message: text })];
    },
    outcome() {
      if (outcome.usage && !outcome.usage.model && threadId) outcome.usage.model = rolloutModel(env, threadId) ?? "";
      return outcome;
    },
  };
}
