// What the LLM planners (providerA, providerB) share: the system prompt, history shaping,
// the show_view pseudo-tool, and settling raw model tool calls against the catalog.
import { EpError } from "../../../common/errors.js";
import { findTool, validateToolArgs, type Tool } from "../tools/index.js";
import type { Awaitable, ChatMessage, PlanInput, PlannedToolCall, PlannerContext } from "./planner.js";
import { validateViewSpec, type ViewSpec } from "./view-spec.js";

/** The pseudo-tool through which an LLM planner emits view_specs. Never executed. */
export const SHOW_VIEW_TOOL = {
  name: "show_view",
  description:
    "Show structured output in the console. view_specs is a list of objects with `type` one of: " +
    ("table {type,title?,columns:string[],rows:(string|number|boolean|null)[][]}; " +
      "kv {type,title?,items:{key,value}[]}; ") +
    ("cards {type,title?,cards:{title,subtitle?,status?,fields?:{key,value}[]}[]}; " +
      "timeline {type,title?,items:{at,title,detail?}[]}; ") +
    ("log_stream {type,title?,lines:string[]}. Plain text only: no HTML, " +
      "no links, no scripts. Read-tool results are shown automatically."),
  inputSchema: {
    type: "object",
    properties: { view_specs: { type: "array", items: { type: "object" } } },
    required: ["view_specs"],
    additionalProperties: false,
  },
} as const;

export function systemPrompt(tools: Tool[], snapshot: string | undefined, defaultRuntime: string | undefined): string {
  const reads = tools.filter((t) => t.kind === "read").map((t) => t.name);
  const writes = tools.filter((t) => t.kind === "write").map((t) => t.name);
  return [
    "You are the planner of EP's AI console, an agent work-execution " +
      "platform (domain → mission → task; agents on nodes).",
    "Map the operator's request to tool calls. Read tools run at once and their results are shown to the operator.",
    "Write tools do not run now: each becomes a pending action " +
      "that a human approves or rejects in the console's action bar.",
    "Never claim that something was changed; say what you proposed. A message never approves anything.",
    "Arguments ending in _id take ids (dom_…, msn_…, tsk_…, " +
      "agt_…, nod_…); use a read tool first if you only know a name.",
    `Read tools: ${reads.join(", ")}. Write tools: ${writes.join(", ")}.`,
    defaultRuntime ? `Work you create uses runtime ${defaultRuntime} unless the operator names another.` : "",
    "Reply briefly in plain text.",
    snapshot ? `Current state:\n${snapshot}` : "",
  ]
    .filter(Boolean)
    .join("\n");
}

/** Collapses the history into alternating user/assistant turns, dropping empty messages. */
export function normalizeHistory(history: ChatMessage[], content: string): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (const m of [...history, { role: "user" as const, content }]) {
    if ((m.role !== "user" && m.role !== "assistant") || typeof m.content !== "string" || m.content.trim() === "")
      continue;
    const last = out[out.length - 1];
    if (last && last.role === m.role) last.content += `\n\n${m.content}`;
    else out.push({ role: m.role, content: m.content });
  }
  while (out.length > 0 && out[0].role !== "user") out.shift();
  return out;
}

const ID_RESOLVERS: Record<string, (ctx: PlannerContext, v: string) => Awaitable<{ id: string } | undefined>> = {
  domain_id: (ctx, v) => ctx.findDomain(v),
  mission_id: (ctx, v) => ctx.findMission(v),
  task_id: (ctx, v) => ctx.findTask(v),
  agent_id: (ctx, v) => ctx.findAgent(v),
  assignee_agent_id: (ctx, v) => ctx.findAgent(v),
};
const ID_SHAPE = /^[a-z]{3}_[0-9a-z]+$/;

/**
 * Checks raw tool calls from an LLM: unknown tools and invalid arguments are dropped with a
 * note; names given where ids belong are resolved through the context; `show_view` calls
 * become validated view_specs (script-carrying ones are dropped with a note).
 */
export async function settleToolCalls(
  raw: { tool: string; arguments: unknown }[],
  input: PlanInput,
): Promise<{ toolCalls: PlannedToolCall[]; viewSpecs: ViewSpec[]; notes: string[] }> {
  const toolCalls: PlannedToolCall[] = [];
  const viewSpecs: ViewSpec[] = [];
  const notes: string[] = [];
  const offered = new Set(input.tools.map((t) => t.name));
  for (const call of raw) {
    if (call.tool === SHOW_VIEW_TOOL.name) {
      const specs = (call.arguments as { view_specs?: unknown } | null)?.view_specs;
      for (const spec of Array.isArray(specs) ? specs : []) {
        try {
          viewSpecs.push(validateViewSpec(spec));
        } catch (err) {
          notes.push(`A view was not shown: ${(err as Error).message}.`);
        }
      }
      continue;
    }
    const tool = findTool(call.tool);
    if (!tool || !offered.has(call.tool)) {
      notes.push(`Ignored a call to unknown tool '${call.tool}'.`);
      continue;
    }
    let args: Record<string, unknown> =
      call.arguments && typeof call.arguments === "object" && !Array.isArray(call.arguments)
        ? { ...(call.arguments as Record<string, unknown>) }
        : {};
    try {
      for (const [key, resolve] of Object.entries(ID_RESOLVERS)) {
        const v = args[key];
        if (typeof v === "string" && v !== "" && !ID_SHAPE.test(v)) {
          const found = await resolve(input.context, v);
          if (found) args[key] = found.id;
        }
      }
      if (tool.name === "submit_mesh_task" && args.runtime === undefined && input.context.defaultRuntime) {
        args.runtime = input.context.defaultRuntime;
      }
      args = validateToolArgs(tool, args);
      toolCalls.push({ tool: tool.name, arguments: args });
    } catch (err) {
      notes.push(`Ignored an invalid call: ${(err as Error).message}.`);
    }
  }
  return { toolCalls, viewSpecs, notes };
}

/** Joins the model's text and notes into the turn's reply, describing the calls when it said nothing. */
export function composeReply(text: string, toolCalls: PlannedToolCall[], notes: string[]): string {
  const parts = [text.trim()];
  if (parts[0] === "") {
    const writes = toolCalls.filter((c) => findTool(c.tool)?.kind === "write").length;
    if (toolCalls.length === 0) parts[0] = "I have nothing to do for that.";
    else if (writes > 0)
      parts[0] = `Proposed ${toolCalls.map((c) => c.tool).join(", ")}; approve or reject in the action bar.`;
    else parts[0] = `Looking that up with ${toolCalls.map((c) => c.tool).join(", ")}.`;
  }
  return [...parts, ...notes].join("\n");
}

function trimSlashes(url: string): string {
  return url.replace(/\/+$/, "");
}

function checkUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new EpError("config_invalid", `EP_AI_BASE_URL is not a URL: '${raw}'`, { field: "EP_AI_BASE_URL" });
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new EpError("config_invalid", `EP_AI_BASE_URL must be http(s), got '${raw}'`, { field: "EP_AI_BASE_URL" });
  }
  return url;
}

/**
 * Base URL for the OpenAI SDK (which appends `/chat/completions`). Accepts the standard base
 * (`https://api.openai.com/v1`), a gateway base (`http://host/v1`) or the full endpoint
 * (`http://host/v1/chat/completions`).
 */
export function openAiBaseUrl(raw: string | undefined): string | undefined {
  if (raw === undefined || raw.trim() === "") return undefined;
  const url = checkUrl(raw.trim());
  url.search = "";
  url.hash = "";
  return trimSlashes(url.toString()).replace(/\/chat\/completions$/, "");
}

/**
 * Base URL for the Anthropic SDK (which appends `/v1/messages`). Accepts the standard base
 * (`https://api.anthropic.com`), a gateway base ending in `/v1`, or a full endpoint URL
 * ending in `/v1/messages` (or `/v1/chat/completions` for gateways that name it that way).
 */
export function anthropicBaseUrl(raw: string | undefined): string | undefined {
  if (raw === undefined || raw.trim() === "") return undefined;
  const url = checkUrl(raw.trim());
  url.search = "";
  url.hash = "";
  return trimSlashes(url.toString())
    .replace(/\/(messages|chat\/completions)$/, "")
    .replace(/\/v1$/, "");
}

interface SdkErrorShape {
  status?: number;
  message?: string;
  name?: string;
  error?: unknown;
}

/** Any provider failure as EpError `unavailable`, with a message an operator can act on. */
export function providerFailure(
  provider: string,
  keyVar: string,
  err: unknown,
  timeoutMs: number,
  timedOut: boolean,
): EpError {
  if (err instanceof EpError) return err;
  const e = (err ?? {}) as SdkErrorShape;
  const name = e.name ?? "";
  const seconds = Math.round(timeoutMs / 100) / 10;
  if (timedOut || name === "APIConnectionTimeoutError" || name === "APIUserAbortError") {
    return new EpError(
      "unavailable",
      `${provider} did not answer within ${seconds}s (EP_AI_TIMEOUT_SECONDS); try again`,
      {
        provider,
        reason: "timeout",
      },
    );
  }
  if (typeof e.status === "number") {
    const detail = (e.message ?? "").slice(0, 300);
    const hint =
      e.status === 401 || e.status === 403
        ? `; check ${keyVar}`
        : e.status === 404
          ? "; check EP_AI_BASE_URL and EP_AI_MODEL"
          : e.status === 429
            ? "; the provider is rate limiting, retry shortly"
            : "";
    return new EpError("unavailable", `${provider} request failed with HTTP ${e.status}${hint}: ${detail}`, {
      provider,
      status: e.status,
    });
  }
  if (name === "APIConnectionError") {
    return new EpError("unavailable", `${provider} could not be reached (check EP_AI_BASE_URL): ${e.message ?? ""}`, {
      provider,
      reason: "connection",
    });
  }
  return new EpError("unavailable", `${provider} failed: ${e.message ?? String(err)}`, { provider });
}

/**
 * Runs one provider request under a hard deadline: the SDK's own timeout covers the HTTP
 * request, and this abort covers everything else, so a turn never hangs.
 */
export async function withDeadline<T>(
  timeoutMs: number,
  run: (signal: AbortSignal) => Promise<T>,
): Promise<{ value?: T; error?: unknown; timedOut: boolean }> {
  const controller = new AbortController();
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, rejectDeadline) => {
    timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
      rejectDeadline(new Error("deadline"));
    }, timeoutMs);
  });
  try {
    const value = await Promise.race([run(controller.signal), deadline]);
    return { value, timedOut };
  } catch (error) {
    return { error, timedOut };
  } finally {
    clearTimeout(timer);
  }
}
