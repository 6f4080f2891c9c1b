// vendorA_code: `claude -p <prompt> --output-format stream-json --verbose`. Each stdout line is one
// event: `system` (init), `assistant`/`user` messages with content blocks (text, tool_use,
// tool_result), and a closing `result` whose `result` field is the final answer.
// Per run, the task's `input.claude` settings, the permission policy and EP's MCP tools become CLI flags.
import { EpError, invalidField } from "../../common/errors.js";
import { PERMISSION_TOOL } from "../mcp/agent-config.js";
import type { Permission } from "./confine.js";
import { usageOf, type ProgressFrame, type RunSpec } from "./runtime.js";
import { retryFrame } from "./api-retry.js";
import {
  asRecord,
  asString,
  clip,
  type RunAdditions,
  type StreamOutcome,
  type StreamParser,
} from "./process-runtime.js";

/** The environment variable the claude CLI reads its output-token limit from. */
export const MAX_OUTPUT_TOKENS_ENV = "CLAUDE_CODE_MAX_OUTPUT_TOKENS";
/** The fields of `input.claude` (tower/domain/ai/types.ts `ClaudeRuntimeSettings`). */
const CLAUDE_SETTINGS = ["model", "max_tokens", "timeout_seconds"];

/**
 * claude's own permission settings for each policy (docs/runtimes.md "Permissions"). EP's tools
 * (server "ep") are always allowed: claude -p asks for every MCP tool and there is nobody to
 * answer. "workspace" (and "unconfined": claude refuses bypass mode as root) accepts edits in the
 * working directory and allows Bash, which the confinement holds to the workspace; "read-only"
 * and "ask" keep claude's default mode, so edits and commands are refused, or asked of a person
 * through EP's permission_prompt tool.
 */
export function claudePermissionArgs(permission: Permission | undefined): string[] {
  switch (permission) {
    case "read-only":
      return ["--allowedTools", "mcp__ep"];
    case "ask":
      return ["--allowedTools", "mcp__ep", "--permission-prompt-tool", `mcp__ep__${PERMISSION_TOOL}`];
    default:
      return ["--permission-mode", "acceptEdits", "--allowedTools", "mcp__ep", "Bash"];
  }
}

/**
 * What one vendorA_code run adds to the configured command:
 * - `input.claude` (work created from an AI session carries the tower's EP_CLAUDE_* settings
 *   there): `model` → `--model <model>`, `max_tokens` → CLAUDE_CODE_MAX_OUTPUT_TOKENS,
 *   `timeout_seconds` → the run's timeout (unless the caller set one);
 * - the permission flags of the run's policy (claudePermissionArgs);
 * - EP's tools: the run's MCP config (`--mcp-config <file>`, the HTTP door of the running epd).
 * Flags come after the configured args (the CLI takes the last `--model`), and `--mcp-config`
 * comes last because it takes a list of values. A malformed `input.claude` fails the run
 * naming the field.
 */
export function vendorACodeRun(spec: RunSpec, permission: Permission | undefined): RunAdditions | EpError {
  const args: string[] = [];
  const env: Record<string, string> = {};
  let timeoutMs: number | undefined;
  const raw = spec.input.claude;
  if (raw !== undefined && raw !== null) {
    const claude = asRecord(raw);
    if (!claude) return invalidField("input.claude", "must be an object with model, max_tokens or timeout_seconds");
    for (const key of Object.keys(claude)) {
      if (!CLAUDE_SETTINGS.includes(key))
        return invalidField(`input.claude.${key}`, `unknown field (expected ${CLAUDE_SETTINGS.join(", ")})`);
    }
    const { model, max_tokens: maxTokens, timeout_seconds: timeoutSeconds } = claude;
    if (model !== undefined) {
      if (typeof model !== "string" || model.trim() === "" || model.startsWith("-"))
        return invalidField("input.claude.model", "must be a model name");
      args.push("--model", model.trim());
    }
    if (maxTokens !== undefined) {
      if (typeof maxTokens !== "number" || !Number.isInteger(maxTokens) || maxTokens <= 0)
        return invalidField("input.claude.max_tokens", "must be a positive integer");
      env[MAX_OUTPUT_TOKENS_ENV] = String(maxTokens);
    }
    if (timeoutSeconds !== undefined) {
      if (typeof timeoutSeconds !== "number" || !Number.isFinite(timeoutSeconds) || timeoutSeconds <= 0) {
        return invalidField("input.claude.timeout_seconds", "must be a positive number of seconds");
      }
      timeoutMs = Math.round(timeoutSeconds * 1000);
    }
  }
  // claude asks epd's permission_prompt tool (a tower approval) wherever its rules would ask a person
  if (permission === "ask" && !spec.mcp)
    return new EpError(
      "invalid_argument",
      'runtime vendorA_code: permission = "ask" needs EP\'s MCP tools for the run, which this run has not got',
    );
  args.push(...claudePermissionArgs(permission));
  if (spec.mcp) args.push("--mcp-config", spec.mcp.configFile);
  return timeoutMs === undefined ? { args, env } : { args, env, timeoutMs };
}

export function createVendorACodeParser(): StreamParser {
  const texts: string[] = [];
  const outcome: StreamOutcome = { final: false, ok: false, output: "" };
  let model = "";

  const blocks = (event: Record<string, unknown>): Record<string, unknown>[] => {
    const content = asRecord(event.message)?.content;
    if (typeof content === "string") return [{ type: "text", text: content }];
    return Array.isArray(content) ? content.map(asRecord).filter((b): b is Record<string, unknown> => !!b) : [];
  };

  return {
    event(event) {
      const frames: ProgressFrame[] = [];
      switch (event.type) {
        case "system":
          // a refusal: its frame is the refusal watch's (cli-refusals.ts)
          if (event.subtype === "permission_denied") break;
          if (event.subtype === "init" && typeof event.model === "string") model = event.model;
          if (event.subtype === "api_retry") {
            frames.push(claudeRetry(event));
            break;
          }
          frames.push({
            kind: "status",
            text: event.subtype === "init" ? "session started" : `system: ${String(event.subtype ?? "event")}`,
            data: pick(event, ["subtype", "session_id", "model", "cwd", "mcp_servers"]),
          });
          break;
        case "assistant":
          for (const block of blocks(event)) {
            if (block.type === "text" && typeof block.text === "string") {
              texts.push(block.text);
              frames.push({ kind: "text", text: block.text });
            } else if (block.type === "tool_use") {
              const name = asString(block.name) ?? "tool";
              frames.push({
                kind: "tool",
                text: `${name} ${clip(JSON.stringify(block.input ?? {}), 200)}`,
                data: { phase: "call", id: block.id, name, input: block.input },
              });
            }
          }
          break;
        case "user":
          for (const block of blocks(event)) {
            if (block.type !== "tool_result") continue;
            const content = typeof block.content === "string" ? block.content : JSON.stringify(block.content ?? "");
            frames.push({
              kind: "tool",
              text: `${block.is_error ? "tool failed" : "tool result"}: ${clip(content, 200)}`,
              data: {
                phase: "result",
                id: block.tool_use_id,
                is_error: block.is_error === true,
                content: clip(content),
              },
            });
          }
          break;
        case "result": {
          outcome.final = true;
          const u = asRecord(event.usage);
          if (u || typeof event.total_cost_usd === "number") {
            outcome.usage = usageOf({
              input: u?.input_tokens,
              output: u?.output_tokens,
              cached: u?.cache_read_input_tokens,
              cost: event.total_cost_usd,
              model,
            });
          }
          outcome.ok = event.subtype === "success" && event.is_error !== true;
          outcome.output = asString(event.result) ?? texts.join("\n");
          if (!outcome.ok) {
            const errors = Array.isArray(event.errors) ? event.errors.map(String).join("; ") : "";
            // claude reports an API error as subtype "success" with is_error: the result text is
            // the error ("API Error: 400 …"), not a success
            const why = event.subtype === "success" ? "" : String(event.subtype ?? "error");
            outcome.error =
              `vendorA_code: ` + `${[why, asString(event.result), errors].filter(Boolean).join(": ") || "failed"}`;
          }
          const failure =
            event.subtype === "success"
              ? (asString(event.result)?.slice(0, 200) ?? "error")
              : String(event.subtype ?? "error");
          frames.push({
            kind: "status",
            text: outcome.ok ? "finished" : `failed: ${failure}`,
            data: pick(event, [
              "subtype",
              "is_error",
              "duration_ms",
              "num_turns",
              "total_cost_usd",
              "usage",
              "session_id",
            ]),
          });
          break;
        }
        case "stream_event":
          break; // partial deltas (only with --include-partial-messages); whole messages follow
        default:
          frames.push({ kind: "json", text: String(event.type ?? "event"), data: event });
      }
      if (!outcome.final) outcome.output = texts.join("\n");
      return frames;
    },
    outcome: () => outcome,
  };
}

/**
 * claude's `system` event `api_retry` (attempt, max_retries, retry_delay_ms, error_status, error) as a status frame.
 */
function claudeRetry(event: Record<string, unknown>): ProgressFrame {
  const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);
  return retryFrame({
    attempt: num(event.attempt),
    max: num(event.max_retries),
    status: num(event.error_status),
    delayMs: num(event.retry_delay_ms),
    message: asString(event.error),
  });
}

export function pick(event: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of keys) if (event[key] !== undefined) out[key] = event[key];
  return out;
}
