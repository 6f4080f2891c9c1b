// Model API trouble as the vendor CLIs report it while it happens: each retry of a failed request
// becomes a `status` frame at once (data.retry = true, with the attempt and the HTTP status where
// the CLI says them; data.retry = false when the CLI gave up), and an upstream error body ({"error":{"message":…}})
// quoted inside a CLI's message is reduced to the upstream's own words.
import type { ProgressFrame } from "./runtime.js";

export interface RetryInfo {
  /** 1-based number of the attempt that failed (or of the retry about to run, as the CLI counts). */
  attempt?: number;
  /** How many retries (or attempts) the CLI allows, when it says. */
  max?: number;
  /** The HTTP status of the failed request. */
  status?: number;
  /** How long the CLI waits before the next attempt. */
  delayMs?: number;
  /** The upstream's or the CLI's words about the failure. */
  message?: string;
  /** The CLI gave up: this was its last attempt. */
  last?: boolean;
}

/** A retry as a status frame: "model API error 500, retry 2/10 in 1.0 s: the fixture is overloaded". */
export function retryFrame(r: RetryInfo): ProgressFrame {
  const what = r.status ? `model API error ${r.status}` : "model API error";
  const count = r.last
    ? `, attempt ${r.attempt ?? "?"} failed, no retries left`
    : r.attempt !== undefined
      ? `, retry ${r.attempt}${r.max !== undefined ? `/${r.max}` : ""}`
      : ", retrying";
  const wait = r.delayMs !== undefined ? ` in ${(r.delayMs / 1000).toFixed(1)} s` : "";
  const data: Record<string, unknown> = { retry: !r.last };
  if (r.attempt !== undefined) data.attempt = r.attempt;
  if (r.max !== undefined) data.max_retries = r.max;
  if (r.status !== undefined) data.error_status = r.status;
  if (r.delayMs !== undefined) data.retry_delay_ms = r.delayMs;
  if (r.message) data.message = r.message;
  return { kind: "status", text: `${what}${count}${wait}${r.message ? `: ${r.message}` : ""}`, data };
}

/**
 * The upstream's message when `text` is or quotes an error body (`{"error":{"message":"…"}}`,
 * gemini's `[API Error: {…}]`, prefixed "HTTP 500: " when the body has the status as `error.code`);
 * otherwise `text` itself.
 */
export function upstreamMessage(text: string): string {
  const body = errorBody(text);
  if (!body) return text;
  return body.status ? `HTTP ${body.status}: ${body.message}` : body.message;
}

/** The message (and status, when the body has it as `error.code`) of an error body in `text`. */
function errorBody(text: string): { message: string; status?: number } | undefined {
  const start = text.indexOf("{");
  const end = text.lastIndexOf("}");
  if (start < 0 || end <= start) return undefined;
  let body: { error?: { message?: unknown; code?: unknown } | string; message?: unknown };
  try {
    body = JSON.parse(text.slice(start, end + 1)) as typeof body;
  } catch {
    return undefined;
  }
  const err = body.error;
  const message =
    typeof err === "string"
      ? err
      : typeof err?.message === "string"
        ? err.message
        : typeof body.message === "string"
          ? body.message
          : undefined;
  if (message === undefined) return undefined;
  const code = typeof err === "object" ? err.code : undefined;
  return typeof code === "number" && code >= 100 && code < 600 ? { message, status: code } : { message };
}

const GEMINI_RETRY = /^Attempt (\d+) failed(?: with status (\d+))?[.:] ?(.*)$/;

/**
 * gemini's stderr while it retries: "Attempt 2 failed with status 429. Retrying with backoff...
 * _ApiError: {json}" (a stack trace follows), and "Attempt 10 failed: {json}. Max attempts reached".
 */
export function geminiRetryLine(line: string): RetryInfo | undefined {
  const m = GEMINI_RETRY.exec(line.trim());
  if (!m) return undefined;
  const body = errorBody(m[3]);
  const status = m[2] ? Number(m[2]) : body?.status;
  const last = /Max attempts reached/.test(m[3]);
  return {
    attempt: Number(m[1]),
    ...(status ? { status } : {}),
    message: body?.message ?? m[3],
    ...(last ? { last } : {}),
  };
}

const CODEX_RECONNECT = /^Reconnecting\.\.\. (\d+)\/(\d+) \((.*)\)$/s;

/** codex's `error` event while it retries a stream: "Reconnecting... 2/5 (reason)". */
export function codexReconnect(message: string): RetryInfo | undefined {
  const m = CODEX_RECONNECT.exec(message.trim());
  if (!m) return undefined;
  const reason = upstreamMessage(m[3]);
  const status = /last status: (\d{3})/.exec(reason);
  return {
    attempt: Number(m[1]),
    max: Number(m[2]),
    ...(status ? { status: Number(status[1]) } : {}),
    message: reason,
  };
}

const CODEX_REQUEST = /codex_http_client::client: Request completed .*?\bstatus=(\d{3})([^=]*?) headers=(.*)$/;

/**
 * codex's log line for one HTTP request (RUST_LOG codex_http_client::client=debug, which EP sets):
 * "… Request completed method=POST url=… status=500 Internal Server Error headers={"x-request-id": …}".
 * codex itself keeps only "high demand" of a 5xx; this line still has the status and request id.
 */
export function codexRequestLine(line: string): { status: number; reason: string; requestId?: string } | undefined {
  const m = CODEX_REQUEST.exec(line);
  if (!m) return undefined;
  const id = /"x-request-id": "([^"]+)"/.exec(m[3]);
  return { status: Number(m[1]), reason: m[2].trim(), ...(id ? { requestId: id[1] } : {}) };
}
