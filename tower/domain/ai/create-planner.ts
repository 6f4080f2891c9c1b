// The planner the environment asks for. Apart from planner.ts (the interfaces the planners
// implement), so the planners import their interface without importing their own factory.
import { EpError } from "../../../common/errors.js";
import { createHeuristicPlanner } from "./heuristic-planner.js";
import type { Env, Planner, ProviderOptions } from "./planner.js";
import { createProviderAPlanner } from "./provider-a.js";
import { createProviderBPlanner } from "./provider-b.js";

const DEFAULT_TIMEOUT_MS = 60_000;

function positiveNumber(env: Env, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === "") return undefined;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) {
    throw new EpError("config_invalid", `${name} must be a positive number, got '${raw}'`, { field: name });
  }
  return n;
}

/**
 * The planner the environment asks for. `EP_AI_PROVIDER` unset or empty: heuristic (no key
 * needed). `providerA` needs `PROVIDERA_API_KEY`, `providerB` needs `PROVIDERB_API_KEY`;
 * a missing key or an unknown provider is EpError `config_invalid` naming the variable.
 * Also read: EP_AI_MODEL, EP_AI_BASE_URL, EP_AI_TIMEOUT_SECONDS, EP_AI_MAX_TOKENS.
 */
export function createPlanner(env: Env = process.env, overrides: Partial<ProviderOptions> = {}): Planner {
  const provider = (env.EP_AI_PROVIDER ?? "").trim();
  if (provider === "" || provider === "heuristic") return createHeuristicPlanner();
  const timeoutSeconds = positiveNumber(env, "EP_AI_TIMEOUT_SECONDS");
  const common = {
    model: env.EP_AI_MODEL?.trim() || undefined,
    baseUrl: env.EP_AI_BASE_URL?.trim() || undefined,
    timeoutMs: timeoutSeconds !== undefined ? timeoutSeconds * 1000 : DEFAULT_TIMEOUT_MS,
    maxTokens: positiveNumber(env, "EP_AI_MAX_TOKENS"),
    ...overrides,
  };
  if (provider === "providerA") {
    const apiKey = env.PROVIDERA_API_KEY?.trim();
    if (!apiKey) {
      throw new EpError("config_invalid", "EP_AI_PROVIDER=providerA requires PROVIDERA_API_KEY to be set", {
        field: "PROVIDERA_API_KEY",
      });
    }
    return createProviderAPlanner({ ...common, apiKey });
  }
  if (provider === "providerB") {
    const apiKey = env.PROVIDERB_API_KEY?.trim();
    if (!apiKey) {
      throw new EpError("config_invalid", "EP_AI_PROVIDER=providerB requires PROVIDERB_API_KEY to be set", {
        field: "PROVIDERB_API_KEY",
      });
    }
    return createProviderBPlanner({ ...common, apiKey });
  }
  throw new EpError("config_invalid", `EP_AI_PROVIDER must be providerA, providerB or unset, got '${provider}'`, {
    field: "EP_AI_PROVIDER",
  });
}
