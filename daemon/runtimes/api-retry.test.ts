// The parsers fed lines recorded from the real CLIs (claude 2.1.330, codex 0.169.0, gemini-cli
// 0.61.0) while the fake LLM API answered 500, 429 and 400: retries become status frames, the
// final error carries the upstream's message, and usage names the model.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseJsonObject, type StreamParser } from "./process-runtime.js";
import type { ProgressFrame } from "./runtime.js";
import { createVendorACodeParser } from "./vendor-a-code.js";
import { createVendorBParser } from "./vendor-b.js";
import { createVendorCParser } from "./vendor-c.js";

/** Feeds stdout lines (JSON events) and stderr lines, in order, and collects the frames. */
function feed(parser: StreamParser, lines: ({ out: string } | { err: string })[]): ProgressFrame[] {
  const frames: ProgressFrame[] = [];
  for (const line of lines) {
    if ("out" in line) frames.push(...parser.event(parseJsonObject(line.out)!));
    else frames.push(...(parser.stderr?.(line.err) ?? []));
  }
  return frames;
}
const retries = (frames: ProgressFrame[]) => frames.filter((f) => f.kind === "status" && f.data?.retry === true);

describe("claude -p (vendorA_code)", () => {
  it(
    "each api_retry event is a status frame with attempt " + "and status; the result's API error is the run's error",
    () => {
      const parser = createVendorACodeParser();
      const frames = feed(parser, [
        {
          out:
            '{"type":"system","subtype":"init","cwd":"/tmp/fx/run","session_id":"0bf27b47",' +
            '"tools":["Bash"],"mcp_servers":[],"model":"claude-sonnet-4-5"}',
        },
        {
          out:
            '{"type":"system","subtype":"api_retry","attempt":1,"max_retries":2,"retry_delay_ms":551,' +
            '"error_status":500,"error":"server_error","session_id":"0bf27b47","uuid":"a735c8e9"}',
        },
        {
          out:
            '{"type":"system","subtype":"api_retry","attempt":2,"max_retries":2,"retry_delay_ms":1099,' +
            '"error_status":429,"error":"rate_limit","session_id":"0bf27b47","uuid":"01164d38"}',
        },
        {
          out:
            '{"type":"assistant","message":{"id":"1aa8513c","model":"<synthetic>",' +
            '"role":"assistant","type":"message","content":[{"type":"text","text":"API ' +
            "Error: 500 the fixture is overloaded (500). This is a server-side issue, " +
            'usually temporary — try again in a moment."}]},"session_id":"0bf27b47"}',
        },
        {
          out:
            '{"type":"result","subtype":"success","is_error":true,"duration_api_ms":0,"result":"API ' +
            "Error: 500 the fixture is overloaded (500). This is a server-side issue, usually temporary " +
            '— try again in a moment.","stop_reason":"stop_sequence","session_id":"0bf27b47",' +
            '"total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0},"terminal_reason":"api_error"}',
        },
      ]);
      expect(retries(frames)).toEqual([
        {
          kind: "status",
          text: "model API error 500, retry 1/2 in 0.6 s: server_error",
          data: {
            retry: true,
            attempt: 1,
            max_retries: 2,
            error_status: 500,
            retry_delay_ms: 551,
            message: "server_error",
          },
        },
        {
          kind: "status",
          text: "model API error 429, retry 2/2 in 1.1 s: rate_limit",
          data: {
            retry: true,
            attempt: 2,
            max_retries: 2,
            error_status: 429,
            retry_delay_ms: 1099,
            message: "rate_limit",
          },
        },
      ]);
      expect(parser.outcome()).toMatchObject({ final: true, ok: false });
      expect(parser.outcome().error).toContain("vendorA_code: API Error: 500 the fixture is overloaded (500)");
    },
  );
});

describe("gemini -p (vendorC)", () => {
  const init =
    '{"type":"init","timestamp":"2026-11-27T15:58:30.621Z","session_id":"6a5efbd1","model":"gemini-2.5-flash"}';

  it("its stderr 'Attempt N failed' lines are status frames; the result's quoted body is the error", () => {
    const parser = createVendorCParser();
    const frames = feed(parser, [
      { out: init },
      {
        err:
          "Warning: 256-color support not detected. Using a terminal with at " +
          "least 256-color support is recommended for a better visual experience.",
      },
      {
        err:
          "Attempt 1 failed with status 500. Retrying with backoff... _ApiError: " +
          '{"error":{"code":500,"message":"the fixture is overloaded (500)","status":"server_error"}}',
      },
      {
        err:
          "    at throwErrorIfNotOK " +
          "(file:///work/main/tests/real-cli/node_modules/@google/gemini-cli/bundle/chunk-JDPZ4CE3.js:267833:24)",
      },
      {
        err:
          "Attempt 2 failed with status 429. Retrying with backoff... _ApiError: " +
          '{"error":{"code":429,"message":"the fixture rate-limits you (429)","status":"rate_limit_error"}}',
      },
      {
        err:
          'Attempt 10 failed: {"error":{"code":500,"message":"the fixture is ' +
          'overloaded (500)","status":"server_error"}}. Max attempts reached',
      },
      {
        out:
          '{"type":"result","timestamp":"2026-11-27T16:02:16.802Z","status":"error","error":{"type":"unknown",' +
          '"message":"[API Error: {\\"error\\":{\\"code\\":500,\\"message\\":\\"the fixture ' +
          'is overloaded (500)\\",\\"status\\":\\"server_error\\"}}]"},"stats":{"total_tokens":0,' +
          '"input_tokens":0,"output_tokens":0,"cached":0,"input":0,"duration_ms":0,"tool_calls":0}}',
      },
    ]);
    expect(retries(frames).map((f) => f.text)).toEqual([
      "model API error 500, retry 1: the fixture is overloaded (500)",
      "model API error 429, retry 2: the fixture rate-limits you (429)",
    ]);
    expect(retries(frames)[1].data).toEqual({
      retry: true,
      attempt: 2,
      error_status: 429,
      message: "the fixture rate-limits you (429)",
    });
    expect(frames.find((f) => f.data?.retry === false)?.text).toBe(
      "model API error 500, attempt 10 failed, no retries left: the fixture is overloaded (500)",
    );
    expect(parser.outcome().error).toBe("vendorC: HTTP 500: the fixture is overloaded (500)");
  });

  it("usage names the model of the init event", () => {
    const parser = createVendorCParser();
    feed(parser, [
      { out: init },
      {
        out:
          '{"type":"message","timestamp":"2026-11-27T16:07:58.773Z","role":"assistant","content":"hello ' +
          'from the fixtu","delta":true}',
      },
      {
        out: '{"type":"message","timestamp":"2026-11-27T16:07:58.774Z","role":"assistant","content":"re","delta":true}',
      },
      {
        out:
          '{"type":"result","timestamp":"2026-11-27T16:07:58.808Z","status":"success",' +
          '"stats":{"total_tokens":1234,"input_tokens":1200,"output_tokens":34,"cached":0,' +
          '"input":1200,"duration_ms":80,"tool_calls":0,"models":{"gemini-2.5-flash":{"total_tokens":1234,' +
          '"input_tokens":1200,"output_tokens":34,"cached":0,"input":1200}}}}',
      },
    ]);
    expect(parser.outcome()).toMatchObject({
      ok: true,
      output: "hello from the fixture",
      usage: { input_tokens: 1200, output_tokens: 34, model: "gemini-2.5-flash" },
    });
  });
});

describe("codex exec --json (vendorB)", () => {
  const home = mkdtempSync(join(tmpdir(), "ep-codex-home-"));
  afterAll(() => rmSync(home, { recursive: true, force: true }));
  const started = (id: string) => ({ out: `{"type":"thread.started","thread_id":"${id}"}` });

  it(
    "a 500: its request log lines and Reconnecting events " + "are status frames; the error names the upstream status",
    () => {
      const parser = createVendorBParser({ HOME: home });
      const frames = feed(parser, [
        started("01a21db8-f788-76c2-9eee-6c43f39db322"),
        { out: '{"type":"turn.started"}' },
        {
          err:
            "2026-11-27T16:02:50.887417Z DEBUG codex_http_client::client: Request completed method=POST " +
            'url=http://127.0.0.1:47811/v1/responses status=500 Internal Server Error headers={"x-request-id": ' +
            '"req-KW6s0ajPLARHVy5r", "access-control-allow-origin": "*", "content-type": "application/json"}',
        },
        {
          out:
            '{"type":"error","message":"Reconnecting... 1/5 (We’re currently ' +
            'experiencing high demand, which may cause temporary errors.)"}',
        },
        {
          err:
            "2026-11-27T16:02:51.109199Z DEBUG codex_http_client::client: Request completed " +
            "method=POST url=http://127.0.0.1:47811/v1/responses status=500 Internal Server Error " +
            'headers={"x-request-id": "req-jo6kZJBf97QV9-43", "access-control-allow-origin": "*"}',
        },
        {
          out:
            '{"type":"error","message":"We’re currently experiencing ' +
            'high demand, which may cause temporary errors."}',
        },
        {
          out:
            '{"type":"turn.failed","error":{"message":"We’re currently ' +
            'experiencing high demand, which may cause temporary errors."}}',
        },
      ]);
      expect(retries(frames).map((f) => f.text)).toEqual([
        "model API error 500, retry 1: HTTP 500 Internal Server Error, request id req-KW6s0ajPLARHVy5r",
        "model API error, retry 1/5: We’re currently experiencing high demand, which may cause temporary errors.",
        "model API error 500, retry 2: HTTP 500 Internal Server Error, request id req-jo6kZJBf97QV9-43",
      ]);
      expect(parser.outcome().error).toBe(
        "vendorB: We’re currently experiencing high demand, which may cause temporary " +
          "errors. (upstream HTTP 500 Internal Server Error, request id req-jo6kZJBf97QV9-43)",
      );
    },
  );

  it("a 429's Reconnecting events carry the status; a 400's JSON body is reduced to its message", () => {
    const rate = createVendorBParser({ HOME: home });
    const frames = feed(rate, [
      started("01a21db9-32b0-7a40-a55e-d825ca92153c"),
      {
        err:
          "2026-11-27T16:05:01.000000Z DEBUG codex_http_client::client: Request " +
          "completed method=POST url=http://127.0.0.1:47811/v1/responses status=429 " +
          'Too Many Requests headers={"x-request-id": "req-lxOzj-Sim_gTW0Zr"}',
      },
      {
        out:
          '{"type":"error","message":"Reconnecting... 2/5 (exceeded retry limit, ' +
          'last status: 429 Too Many Requests, request id: req-UeP7OuTHhXiww-yk)"}',
      },
      {
        out:
          '{"type":"turn.failed","error":{"message":"exceeded retry limit, last ' +
          'status: 429 Too Many Requests, request id: req-01sim0ZRW0ZxolcN"}}',
      },
    ]);
    expect(retries(frames)[1].data).toMatchObject({ attempt: 2, max_retries: 5, error_status: 429 });
    // codex named the status itself: nothing to add
    expect(rate.outcome().error).toBe(
      "vendorB: exceeded retry limit, last status: 429 Too Many Requests, request id: req-01sim0ZRW0ZxolcN",
    );

    const refused = createVendorBParser({ HOME: home });
    feed(refused, [
      started("01a21db9-5f62-7262-abe8-f993775c3667"),
      {
        out:
          '{"type":"error","message":"{\\"error\\":{\\"message\\":\\"the fixture refuses this ' +
          'request\\",\\"type\\":\\"invalid_request_error\\",\\"param\\":null,\\"code\\":null}}"}',
      },
      {
        out:
          '{"type":"turn.failed","error":{"message":"{\\"error\\":{\\"message\\":\\"the fixture refuses ' +
          'this request\\",\\"type\\":\\"invalid_request_error\\",\\"param\\":null,\\"code\\":null}}"}}',
      },
    ]);
    expect(refused.outcome().error).toBe("vendorB: the fixture refuses this request");
  });

  it("usage names the model of the session's rollout file", () => {
    const thread = "01a21dbf-b588-7b63-bf8c-ff9e64cf783a";
    const day = join(home, ".codex", "sessions", "2026", "11", "27");
    mkdirSync(day, { recursive: true });
    writeFileSync(
      join(day, `rollout-2026-11-27T16-03-52-${thread}.jsonl`),
      [
        '{"timestamp":"2026-11-27T16:03:52.870Z","type":"session_meta",' +
          '"payload":{"id":"01a21dbf-b588-7b63-bf8c-ff9e64cf783a","cwd":"/tmp/fx/run"}}',
        '{"timestamp":"2026-11-27T16:03:52.876Z","type":"turn_context",' +
          '"payload":{"turn_id":"01a21dbf-b596-7130-92b3-46d682b5ae57",' +
          '"cwd":"/tmp/fx/run","model":"gpt-6.1-sol"}}',
      ].join("\n") + "\n",
    );
    const parser = createVendorBParser({ HOME: home });
    feed(parser, [
      started(thread),
      {
        out:
          '{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"codeword ' +
          'pelican-773\\nsecond line here"}}',
      },
      {
        out:
          '{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,' +
          '"cache_write_input_tokens":0,"output_tokens":4,"reasoning_output_tokens":0}}',
      },
    ]);
    expect(parser.outcome().usage).toMatchObject({ input_tokens: 10, output_tokens: 4, model: "gpt-6.1-sol" });
    // CODEX_HOME, when set, is where codex keeps its sessions
    const elsewhere = createVendorBParser({ HOME: "/nonexistent", CODEX_HOME: join(home, ".codex") });
    feed(elsewhere, [
      started(thread),
      { out: '{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}' },
    ]);
    expect(elsewhere.outcome().usage?.model).toBe("gpt-6.1-sol");
  });
});
