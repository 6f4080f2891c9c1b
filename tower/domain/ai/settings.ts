// The AI console's other tower settings (the seed's "Other settings"), read and checked once at
// startup: the runtime of work created from a session, and the vendorA_code model settings
// that travel with that work.
import { EpError } from "../../../common/errors.js";
import { RUNTIMES } from "../tools/index.js";
import type { Env } from "./planner.js";
import type { AiSettings, ClaudeRuntimeSettings, Runtime } from "./types.js";

function positiveInt(env: Env, name: string): number | undefined {
  const raw = env[name]?.trim();
  if (!raw) return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0)
    throw new EpError("config_invalid", `${name} must be a positive integer, got '${raw}'`, { field: name });
  return n;
}

function positiveNumber(env: Env, name: string): number | undefined {
  const raw = env[name]?.trim();
  if (!raw) return undefined;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0)
    throw new EpError("config_invalid", `${name} must be a positive number, got '${raw}'`, { field: name });
  return n;
}

/** Reads EP_CENTRAL_RUNTIME_DEFAULT and EP_CLAUDE_*; a bad value is EpError `config_invalid` naming the variable. */
export function readAiSettings(env: Env = process.env): AiSettings {
  const runtime = env.EP_CENTRAL_RUNTIME_DEFAULT?.trim();
  if (runtime && !(RUNTIMES as readonly string[]).includes(runtime)) {
    throw new EpError(
      "config_invalid",
      `EP_CENTRAL_RUNTIME_DEFAULT must be one of ${RUNTIMES.join(", ")}, got '${runtime}'`,
      {
        field: "EP_CENTRAL_RUNTIME_DEFAULT",
      },
    );
  }
  const claude: ClaudeRuntimeSettings = {};
  const model = env.EP_CLAUDE_MODEL?.trim();
  if (model) claude.model = model;
  const maxTokens = positiveInt(env, "EP_CLAUDE_MAX_TOKENS");
  if (maxTokens !== undefined) claude.max_tokens = maxTokens;
  const timeout = positiveNumber(env, "EP_CLAUDE_TIMEOUT_SECONDS");
  if (timeout !== undefined) claude.timeout_seconds = timeout;
  const out: AiSettings = { claude };
  if (runtime) out.centralRuntimeDefault = runtime as Runtime;
  return out;
}
