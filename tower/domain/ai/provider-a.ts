// providerA: the Anthropic Messages API wire format through the official SDK. Tools go out
// as {name, description, input_schema}; `tool_use` blocks come back as tool calls.
import Anthropic from "@anthropic-ai/sdk";
import type { Planner, PlanInput, PlanResult, ProviderOptions } from "./planner.js";
import {
  SHOW_VIEW_TOOL,
  anthropicBaseUrl,
  composeReply,
  normalizeHistory,
  providerFailure,
  settleToolCalls,
  systemPrompt,
  withDeadline,
} from "./provider-common.js";

// The newest Sonnet the pinned SDK knows; a test fails when the SDK marks it deprecated.
export const PROVIDER_A_DEFAULT_MODEL = "claude-sonnet-5-5";
const DEFAULT_MAX_TOKENS = 4096;

export function createProviderAPlanner(opts: ProviderOptions): Planner {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const model = opts.model ?? PROVIDER_A_DEFAULT_MODEL;
  const client = new Anthropic({
    apiKey: opts.apiKey,
    authToken: null,
    // This SDK sends the key as a Bearer token; gateways and older servers read x-api-key.
    defaultHeaders: { "x-api-key": opts.apiKey },
    baseURL: anthropicBaseUrl(opts.baseUrl) ?? "https://api.anthropic.com",
    timeout: timeoutMs,
    maxRetries: opts.maxRetries ?? 0,
  });

  async function plan(input: PlanInput): Promise<PlanResult> {
    const snapshot = input.context.snapshot ? await input.context.snapshot() : undefined;
    const tools = [
      ...input.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.inputSchema })),
      { name: SHOW_VIEW_TOOL.name, description: SHOW_VIEW_TOOL.description, input_schema: SHOW_VIEW_TOOL.inputSchema },
    ];
    const outcome = await withDeadline(timeoutMs, (signal) =>
      client.messages.create(
        {
          model,
          max_tokens: opts.maxTokens ?? DEFAULT_MAX_TOKENS,
          system: systemPrompt(input.tools, snapshot, input.context.defaultRuntime),
          messages: normalizeHistory(input.history, input.content),
          tools: tools as Anthropic.Tool[],
        },
        { signal },
      ),
    );
    if (outcome.error !== undefined || !outcome.value) {
      throw providerFailure("providerA", "PROVIDERA_API_KEY", outcome.error, timeoutMs, outcome.timedOut);
    }
    const message = outcome.value;
    if (!Array.isArray(message.content)) {
      throw providerFailure(
        "providerA",
        "PROVIDERA_API_KEY",
        new Error("the response has no content blocks"),
        timeoutMs,
        false,
      );
    }
    const texts: string[] = [];
    const raw: { tool: string; arguments: unknown }[] = [];
    for (const block of message.content) {
      if (block.type === "text") texts.push(block.text);
      else if (block.type === "tool_use") raw.push({ tool: block.name, arguments: block.input });
    }
    const settled = await settleToolCalls(raw, input);
    const result: PlanResult = {
      reply: composeReply(texts.join("\n"), settled.toolCalls, settled.notes),
      toolCalls: settled.toolCalls,
    };
    if (settled.viewSpecs.length > 0) result.viewSpecs = settled.viewSpecs;
    return result;
  }

  return { name: "providerA", model, plan };
}
