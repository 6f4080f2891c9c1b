// vendorC: `gemini -p <prompt> -o stream-json`. Events: `init` (session id, model), `message`
// (role user|assistant, assistant text streamed as `delta: true` chunks), `tool_use`,
// `tool_result`, non-fatal `error`, and a closing `result` with `status` success|error and stats.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { EpError } from "../../common/errors.js";
import { writeOwnFile } from "../mcp/agent-config.js";
import { geminiRetryLine, retryFrame, upstreamMessage } from "./api-retry.js";
import { usageOf, type RunSpec } from "./runtime.js";
import {
  asRecord,
  asString,
  clip,
  type RunAdditions,
  type StreamOutcome,
  type StreamParser,
} from "./process-runtime.js";
import { pick } from "./vendor-a-code.js";
import type { Permission } from "./confine.js";

/** Where gemini reads its system settings unless GEMINI_CLI_SYSTEM_SETTINGS_PATH says otherwise (Linux). */
const SYSTEM_SETTINGS = "/etc/gemini-cli/settings.json";
export const GEMINI_SETTINGS_FILE = ".ep-gemini-settings.json";

/**
 * What one vendorC run adds: gemini's approval mode for the policy ("plan" is its read-only mode;
 * otherwise "yolo": its file tools keep to the workspace themselves, its shell is held there by
 * the confinement), and EP's tools: gemini reads MCP servers only from settings files, so the run
 * gets its own system settings file (the node's, if any, plus the `ep` server) in its directory.
 */
export function vendorCRun(spec: RunSpec, permission: Permission | undefined): RunAdditions | EpError {
  const args = ["--approval-mode", permission === "read-only" ? "plan" : "yolo"];
  if (!spec.mcp || !spec.places) return { args };
  const mcp = spec.mcp;
  const file = geminiSettingsFile(spec.env, spec.places.runDir, (settings) => {
    settings.mcpServers = {
      ...asRecord(settings.mcpServers),
      ep: { httpUrl: mcp.url, headers: { Authorization: `Bearer ${mcp.token}` }, trust: true },
    };
  });
  return file instanceof EpError ? file : { args, env: { GEMINI_CLI_SYSTEM_SETTINGS_PATH: file } };
}

/**
 * A run's own gemini system settings file in `runDir`: the node's (GEMINI_CLI_SYSTEM_SETTINGS_PATH
 * of the run's environment, else /etc/gemini-cli/settings.json, if any) changed by `change`.
 * Its path is what GEMINI_CLI_SYSTEM_SETTINGS_PATH should name for the run.
 */
export function geminiSettingsFile(
  env: Record<string, string>,
  runDir: string,
  change: (settings: Record<string, unknown>) => void,
): string | EpError {
  const inherited = env.GEMINI_CLI_SYSTEM_SETTINGS_PATH || SYSTEM_SETTINGS;
  let settings: Record<string, unknown> = {};
  try {
    settings = asRecord(JSON.parse(readFileSync(inherited, "utf8"))) ?? {};
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT")
      return new EpError(
        "config_invalid",
        `gemini's system settings ${inherited} cannot be read: ${(err as Error).message}`,
      );
  }
  change(settings);
  return writeOwnFile(join(runDir, GEMINI_SETTINGS_FILE), JSON.stringify(settings, null, 2) + "\n");
}

export function createVendorCParser(): StreamParser {
  const outcome: StreamOutcome = { final: false, ok: false, output: "" };
  let answer = "";
  let lastError: string | undefined;
  let model = "";

  return {
    event(event) {
      switch (event.type) {
        case "init":
          model = asString(event.model) ?? "";
          return [{ kind: "status", text: "session started", data: pick(event, ["session_id", "model"]) }];
        case "message": {
          if (event.role !== "assistant") return [];
          const text = asString(event.content) ?? "";
          // Chunks marked delta continue the previous text; a whole message starts a new paragraph.
          answer += event.delta === true || answer === "" ? text : `\n${text}`;
          if (!outcome.final) outcome.output = answer;
          return text ? [{ kind: "text", text, data: { delta: event.delta === true } }] : [];
        }
        case "tool_use":
          return [
            {
              kind: "tool",
              text: `${asString(event.tool_name) ?? "tool"} ${clip(JSON.stringify(event.parameters ?? {}), 200)}`,
              data: { phase: "call", ...pick(event, ["tool_name", "tool_id", "parameters"]) },
            },
          ];
        case "tool_result": {
          const output = asString(event.output) ?? asString(asRecord(event.error)?.message) ?? "";
          return [
            {
              kind: "tool",
              text: `${String(event.tool_id ?? "tool")} ${String(event.status ?? "done")}: ${clip(output, 200)}`,
              data: { phase: "result", ...pick(event, ["tool_id", "status"]), output: clip(output) },
            },
          ];
        }
        case "error":
          lastError = asString(event.message) ?? "error";
          return [{ kind: "status", text: `${String(event.severity ?? "error")}: ${lastError}`, data: event }];
        case "result": {
          outcome.final = true;
          outcome.ok = event.status === "success";
          const st = asRecord(event.stats);
          if (st && (typeof st.input_tokens === "number" || typeof st.output_tokens === "number")) {
            outcome.usage = usageOf({
              input: st.input_tokens,
              output: st.output_tokens,
              cached: st.cached ?? st.cached_input_tokens,
              model,
            });
          }
          outcome.output = answer;
          const why = asString(asRecord(event.error)?.message) ?? lastError;
          // gemini quotes the upstream body: "[API Error: {"error":{"code":500,"message":"…"}}]"
          if (!outcome.ok) outcome.error = `vendorC: ${why ? upstreamMessage(why) : `status ${String(event.status)}`}`;
          return [
            {
              kind: "status",
              text: outcome.ok ? "finished" : `failed: ${outcome.error}`,
              data: pick(event, ["status", "error", "stats"]),
            },
          ];
        }
        default:
          return [{ kind: "json", text: String(event.type ?? "event"), data: event }];
      }
    },
    stderr(line) {
      const retry = geminiRetryLine(line);
      return retry ? [retryFrame(retry)] : [];
    },
    outcome: () => outcome,
  };
}
