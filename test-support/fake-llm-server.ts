// A fake LLM provider for tests: a real HTTP server on 127.0.0.1:0 that records each request
// and answers with whatever the test's handler returns, in the provider's real wire format.
// Test-only; it is here so every test of the console (planner, sessions) can use the same one.
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: unknown;
}

/** `status` defaults to 200; `hang` never answers (for timeouts). */
export interface FakeReply {
  status?: number;
  body?: unknown;
  hang?: boolean;
}

export interface FakeLlmServer {
  /** http://127.0.0.1:<port> */
  readonly origin: string;
  readonly requests: RecordedRequest[];
  close(): Promise<void>;
}

export async function startFakeLlmServer(
  handler: (req: RecordedRequest) => FakeReply | Promise<FakeReply>,
): Promise<FakeLlmServer> {
  const requests: RecordedRequest[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      let body: unknown = text;
      try {
        body = text === "" ? undefined : JSON.parse(text);
      } catch {
        // keep the raw text: the test asserts on it
      }
      const recorded: RecordedRequest = { method: req.method ?? "", path: req.url ?? "", headers: req.headers, body };
      requests.push(recorded);
      Promise.resolve(handler(recorded)).then(
        (reply) => {
          if (reply.hang) return;
          const payload = typeof reply.body === "string" ? reply.body : JSON.stringify(reply.body ?? {});
          res.writeHead(reply.status ?? 200, { "content-type": "application/json" });
          res.end(payload);
        },
        (err: unknown) => {
          res.writeHead(500, { "content-type": "application/json" });
          res.end(JSON.stringify({ error: { message: String(err) } }));
        },
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** An Anthropic Messages API response with the given content blocks. */
export function anthropicMessage(content: unknown[], model = "claude-test"): unknown {
  return {
    id: "msg_fake",
    type: "message",
    role: "assistant",
    model,
    content,
    stop_reason: content.some((b) => (b as { type?: string }).type === "tool_use") ? "tool_use" : "end_turn",
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 10 },
  };
}

/** An OpenAI Chat Completions response with the given text and tool calls (arguments as objects or raw strings). */
export function openAiCompletion(
  content: string | null,
  toolCalls: { name: string; arguments: unknown }[] = [],
  model = "gpt-test",
): unknown {
  return {
    id: "chatcmpl-fake",
    object: "chat.completion",
    created: 1_700_000_000,
    model,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content,
          refusal: null,
          ...(toolCalls.length > 0
            ? {
                tool_calls: toolCalls.map((c, i) => ({
                  id: `call_${i}`,
                  type: "function",
                  function: {
                    name: c.name,
                    arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments),
                  },
                })),
              }
            : {}),
        },
        finish_reason: toolCalls.length > 0 ? "tool_calls" : "stop",
        logprobs: null,
      },
    ],
    usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 },
  };
}
