// providerB: the OpenAI Chat Completions wire format through the official SDK. Tools go out
// as {type: "function", function: {name, description, parameters}}; `tool_calls` come back.
import OpenAI from "openai";
import type { Planner, PlanInput, PlanResult, ProviderOptions } from "./planner.js";
import {
  SHOW_VIEW_TOOL,
  composeReply,
  normalizeHistory,
  openAiBaseUrl,
  providerFailure,
  settleToolCalls,
  systemPrompt,
  withDeadline,
} from "./provider-common.js";

export const PROVIDER_B_DEFAULT_MODEL = "gpt-4o-mini";

export function createProviderBPlanner(opts: ProviderOptions): Planner {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const model = opts.model ?? PROVIDER_B_DEFAULT_MODEL;
  const client = new OpenAI({
    apiKey: opts.apiKey,
    organization: null,
    project: null,
    baseURL: openAiBaseUrl(opts.baseUrl) ?? "https://api.openai.com/v1",
    timeout: timeoutMs,
    maxRetries: opts.maxRetries ?? 0,
  });

  async function plan(input: PlanInput): Promise<PlanResult> {
    const snapshot = input.context.snapshot ? await input.context.snapshot() : undefined;
    const tools: OpenAI.Chat.ChatCompletionTool[] = [
      ...input.tools.map((t) => ({
        type: "function" as const,
        function: { name: t.name, description: t.description, parameters: t.inputSchema as Record<string, unknown> },
      })),
      {
        type: "function" as const,
        function: {
          name: SHOW_VIEW_TOOL.name,
          description: SHOW_VIEW_TOOL.description,
          parameters: SHOW_VIEW_TOOL.inputSchema as unknown as Record<string, unknown>,
        },
      },
    ];
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
      { role: "system", content: systemPrompt(input.tools, snapshot, input.context.defaultRuntime) },
      ...normalizeHistory(input.history, input.content),
    ];
    const body: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming = { model, messages, tools, tool_choice: "auto" };
    if (opts.maxTokens !== undefined) body.max_tokens = opts.maxTokens;
    const outcome = await withDeadline(timeoutMs, (signal) => client.chat.completions.create(body, { signal }));
    if (outcome.error !== undefined || !outcome.value) {
      throw providerFailure("providerB", "PROVIDERB_API_KEY", outcome.error, timeoutMs, outcome.timedOut);
    }
    const choice = outcome.value.choices?.[0];
    if (!choice?.message) {
      throw providerFailure(
        "providerB",
        "PROVIDERB_API_KEY",
        new Error("the response has no choices"),
        timeoutMs,
        false,
      );
    }
    const raw: { tool: string; arguments: unknown }[] = [];
    const notes: string[] = [];
    for (const call of choice.message.tool_calls ?? []) {
      if (call.type !== "function") continue;
      try {
        raw.push({
          tool: call.function.name,
          arguments: call.function.arguments ? JSON.parse(call.function.arguments) : {},
        });
      } catch {
        notes.push(`Ignored a call to '${call.function.name}' whose arguments were not valid JSON.`);
      }
    }
    const settled = await settleToolCalls(raw, input);
    const result: PlanResult = {
      reply: composeReply(choice.message.content ?? "", settled.toolCalls, [...notes, ...settled.notes]),
      toolCalls: settled.toolCalls,
    };
    if (settled.viewSpecs.length > 0) result.viewSpecs = settled.viewSpecs;
    return result;
  }

  return { name: "providerB", model, plan };
}
