// The daemon's validated MCP path: every tool call an agent (epd mcp) or an operator
// (ep run <tool> --domain <id>) makes through this node goes
//   schema pack (domain/mission/task/doc/artifact payloads)  -> invalid_argument naming the JSON path
//   planner booster (Wasm)                                    -> allow | reject | short-circuit | error
//   POST <tower>/mcp/call with the node token                 -> {result} or the tower's error
// Each booster verdict is published as a `matrix` telemetry event named `booster.verdict`
// (fire and forget: telemetry never delays or fails a call). A short-circuit answers with
// success and makes no request to /mcp/call. docs/booster.md, docs/ai.md.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { EpError, invalidField, isErrorCode, toEpError } from "../../common/errors.js";
import { silentLogger, type Logger } from "../../common/log.js";
import { verdictError, type Booster, type BoosterVerdict } from "../booster/booster.js";
import { validatePayload, type SchemaPack } from "../booster/schema-pack.js";

/** A telemetry event as NodeService.PublishEvents takes it (proto JSON field names). */
export interface TelemetryEvent {
  type: "matrix";
  name: string;
  domainId?: string;
  agentId?: string;
  status: string;
  payload: JsonObject;
}

export interface ToolCallScope {
  /** The domain the call is made in (`ep run --domain`); the tower scopes the node to it. */
  domainId?: string;
  /** The agent making the call (EP_AGENT_ID of an agent the daemon launched). */
  agentId?: string;
}

export interface ToolCallResult {
  result: JsonValue;
  /** true when the booster answered the call without sending it to the tower */
  shortCircuited: boolean;
}

export interface ToolCallerOptions {
  /** The tower's base URL (no trailing slash needed). */
  towerUrl: string;
  /** The node JWT (node.json), sent as Bearer. */
  token: string;
  pack: SchemaPack;
  booster: Booster;
  /** Publishes telemetry, e.g. `(events) => tower.nodes.publishEvents({ events })`. */
  publish: (events: TelemetryEvent[]) => Promise<unknown>;
  log?: Logger;
  fetch?: typeof fetch;
  /** Longest a /mcp/call may take (claims may wait up to 60 s); default 120 s. */
  timeoutMs?: number;
}

export interface ToolCaller {
  call(tool: string, args: unknown, scope?: ToolCallScope): Promise<ToolCallResult>;
  close(): Promise<void>;
}

function telemetry(tool: string, v: BoosterVerdict, booster: Booster, scope: ToolCallScope): TelemetryEvent {
  const payload: JsonObject = {
    tool,
    verdict: v.verdict,
    booster: booster.source,
    duration_ms: Math.round(v.durationMs * 1000) / 1000,
  };
  if (v.verdict === "reject" || v.verdict === "short_circuit") payload.reason = v.reason;
  if (v.verdict === "error") {
    payload.error = v.error.message;
    const cause = v.error.details?.cause;
    if (typeof cause === "string") payload.cause = cause;
  }
  return {
    type: "matrix",
    name: "booster.verdict",
    domainId: scope.domainId,
    agentId: scope.agentId,
    status: v.verdict,
    payload,
  };
}

export function createToolCaller(opts: ToolCallerOptions): ToolCaller {
  const log = opts.log ?? silentLogger;
  const doFetch = opts.fetch ?? fetch;
  const base = opts.towerUrl.replace(/\/+$/, "");
  const timeoutMs = opts.timeoutMs ?? 120_000;

  // Tool names from the tower's GET /mcp/tools, read once: an unknown tool is tool_not_found
  // before the pack and the booster see it. If the catalog cannot be read, the tower decides.
  let known: Promise<Set<string> | undefined> | undefined;
  function knownTools(): Promise<Set<string> | undefined> {
    known ??= doFetch(`${base}/mcp/tools`, {
      headers: { authorization: `Bearer ${opts.token}` },
      signal: AbortSignal.timeout(15_000),
    })
      .then(async (res) =>
        res.ok ? new Set(((await res.json()) as { tools: { name: string }[] }).tools.map((t) => t.name)) : undefined,
      )
      .catch(() => undefined) // unknown: the call goes through and the tower answers with its own error
      .then((names) => {
        if (!names) known = undefined; // try again next call
        return names;
      });
    return known;
  }

  function emit(event: TelemetryEvent): void {
    opts.publish([event]).catch((err: unknown) =>
      log.warn("booster telemetry not published", {
        tool: event.payload.tool as string,
        error: toEpError(err).message,
      }),
    );
  }

  async function forward(tool: string, args: unknown, scope: ToolCallScope): Promise<JsonValue> {
    const body: Record<string, unknown> = { tool, arguments: args ?? {} };
    if (scope.agentId) body.agent_id = scope.agentId;
    if (scope.domainId) body.domain_id = scope.domainId;
    let res: Response;
    try {
      res = await doFetch(`${base}/mcp/call`, {
        method: "POST",
        headers: { authorization: `Bearer ${opts.token}`, "content-type": "application/json" },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      const e = err as Error;
      if (e.name === "TimeoutError")
        throw new EpError("unavailable", `the tower did not answer ${tool} within ${Math.round(timeoutMs / 1000)}s`);
      throw new EpError("unavailable", `cannot reach the tower at ${base}: ${e.message}`);
    }
    const text = await res.text();
    let parsed:
      | { result?: JsonValue; error?: { code?: string; message?: string; details?: Record<string, unknown> } }
      | undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    if (!res.ok) {
      const code = parsed?.error?.code;
      throw new EpError(
        code && isErrorCode(code) ? code : res.status >= 500 ? "unavailable" : "internal",
        parsed?.error?.message ?? `the tower answered HTTP ${res.status} to ${tool}`,
        parsed?.error?.details,
      );
    }
    if (!parsed || !("result" in parsed)) throw new EpError("internal", `the tower's answer to ${tool} has no result`);
    return parsed.result ?? null;
  }

  async function call(tool: string, args: unknown, scope: ToolCallScope = {}): Promise<ToolCallResult> {
    if (typeof tool !== "string" || !tool.trim())
      throw invalidField("tool", "is required (a tool name from GET /mcp/tools)");
    if (args !== undefined && args !== null && (typeof args !== "object" || Array.isArray(args))) {
      throw new EpError("invalid_argument", `${tool}: arguments must be a JSON object`, { field: "arguments", tool });
    }
    const names = await knownTools();
    if (names && !names.has(tool))
      throw new EpError("tool_not_found", `No tool named '${tool}'; list them with GET /mcp/tools.`, { tool });
    const payloadError = validatePayload(opts.pack, tool, args ?? {});
    if (payloadError) throw payloadError;
    const verdict = opts.booster.validate(tool, args ?? null);
    emit(telemetry(tool, verdict, opts.booster, scope));
    const stop = verdictError(verdict, tool, opts.booster.source);
    if (stop) throw stop;
    if (verdict.verdict === "short_circuit") {
      return { result: { short_circuited: true, tool, reason: verdict.reason }, shortCircuited: true };
    }
    return { result: await forward(tool, args, scope), shortCircuited: false };
  }

  return {
    call,
    close: () => opts.booster.close(),
  };
}

/**
 * Loads the schema pack (EP_SCHEMA_PACK_FILE; a broken pack warns and falls back) and the
 * booster (--booster-wasm; a module that fails to load is a `config_invalid` startup error),
 * then builds the caller. close() stops the booster's worker.
 */
export async function openToolCaller(
  opts: Omit<ToolCallerOptions, "pack" | "booster"> & {
    schemaPackFile?: string;
    boosterWasm?: string;
    boosterTimeoutMs?: number;
  },
): Promise<ToolCaller> {
  const log = opts.log ?? silentLogger;
  const { loadSchemaPack } = await import("../booster/schema-pack.js");
  const { loadBooster } = await import("../booster/booster.js");
  const pack = loadSchemaPack(opts.schemaPackFile, log);
  const booster = await loadBooster(opts.boosterWasm || undefined, { log, timeoutMs: opts.boosterTimeoutMs });
  return createToolCaller({ ...opts, pack, booster });
}
