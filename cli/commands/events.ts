// ep events tail: follows GET /events/stream (SSE). On a dropped connection it waits 1 s,
// doubling up to 30 s, and resumes after the last id it printed (Last-Event-ID), so nothing is
// printed twice and nothing is skipped.
import { createBackoff as createCommonBackoff, type Backoff } from "../../common/backoff.js";
import { EpError, isErrorCode } from "../../common/errors.js";
import { UsageError, type Context } from "../context.js";
import { agentOf, eventLine } from "../event-line.js";
import { towerNameBook } from "../name-book.js";
import { withHint } from "../fail.js";
import { createSseParser } from "../../common/sse.js";

export { createSseParser, type SseMessage } from "../../common/sse.js";
/**
 * The reconnect delays of the seed: 1 s, doubling, at most 30 s; reset after a good connection.
 * Exact (no jitter): one operator's stream is no herd, and the delays printed match the seed's.
 */
export function createBackoff(firstMs = 1000, maxMs = 30_000): Backoff {
  return createCommonBackoff({ initialMs: firstMs, maxMs, jitter: 0 });
}

export function streamUrl(base: string, f: { types: string[]; domain?: string; mission?: string }): string {
  const q = new URLSearchParams();
  if (f.types.length) q.set("type", f.types.join(","));
  if (f.domain) q.set("domain_id", f.domain);
  if (f.mission) q.set("mission_id", f.mission);
  const qs = q.toString();
  return `${base}/events/stream${qs ? `?${qs}` : ""}`;
}

const FINAL_STATUSES = new Set([400, 401, 403, 404]);

export async function run(ctx: Context): Promise<number> {
  const types = ctx
    .list("type")
    .flatMap((t) => t.split(","))
    .filter(Boolean);
  for (const t of types)
    if (!["approval", "inbox", "matrix", "progress"].includes(t))
      throw new UsageError(`--type must be approval, inbox, matrix or progress (got ${JSON.stringify(t)})`);
  const since = ctx.str("since");
  if (since !== undefined && !/^\d+$/.test(since))
    throw new UsageError(`--since must be an event id (a number; got ${JSON.stringify(since)})`);
  const limitRaw = ctx.str("limit");
  const limit = limitRaw === undefined ? Infinity : Number(limitRaw);
  if (limitRaw !== undefined && (!Number.isInteger(limit) || limit <= 0))
    throw new UsageError(`--limit must be a positive integer (got ${JSON.stringify(limitRaw)})`);

  const url = streamUrl(ctx.url(), { types, domain: ctx.str("domain"), mission: ctx.str("mission") });
  const token = ctx.token();
  const backoff = createBackoff();
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  let lastId = since;
  let printed = 0;
  // agents by name in the lines; an agent not seen yet (enrolled since) reloads the names once
  const book = towerNameBook(ctx);
  const askedFor = new Set<string>();
  const nameOf = async (e: Record<string, unknown>): Promise<void> => {
    const agent = agentOf(e);
    if (!agent?.startsWith("agt_") || book.lookup(agent) || askedFor.has(agent)) return;
    askedFor.add(agent);
    book.forget("agent");
    await book.load("agent");
  };
  if (!ctx.json) await book.load("agent");
  try {
    while (!stop.signal.aborted) {
      let res: Response | undefined;
      try {
        const headers: Record<string, string> = { accept: "text/event-stream" };
        if (token) headers.authorization = `Bearer ${token}`;
        if (lastId) headers["last-event-id"] = lastId;
        res = await fetch(url, { headers, signal: stop.signal });
        if (FINAL_STATUSES.has(res.status)) {
          const body = (await res.json().catch(() => ({}))) as { error?: { code?: string; message?: string } };
          const code = body.error?.code;
          const err = new EpError(
            code && isErrorCode(code) ? code : res.status === 404 ? "route_not_found" : "invalid_argument",
            `${url}: ${res.status} ${body.error?.message ?? res.statusText}`,
          );
          throw res.status === 404 && code === "route_not_found"
            ? withHint(err, "this tower has no event stream yet; upgrade it")
            : err;
        }
        if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
        backoff.reset();
        const parser = createSseParser();
        const decoder = new TextDecoder();
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          for (const msg of parser.push(decoder.decode(chunk, { stream: true }))) {
            if (msg.id) lastId = msg.id;
            if (!msg.data) continue;
            let e: Record<string, unknown>;
            try {
              e = JSON.parse(msg.data) as Record<string, unknown>;
            } catch {
              e = { type: msg.event ?? "message", payload: { text: msg.data } };
            }
            if (ctx.json) ctx.out(JSON.stringify(msg.id ? { id: Number(msg.id), ...e } : e));
            else {
              await nameOf(e);
              ctx.out(eventLine(msg.id, e, book.lookup));
            }
            if (++printed >= limit) return 0;
          }
        }
        throw new Error("the stream ended");
      } catch (err) {
        if (err instanceof EpError) throw err;
        if (stop.signal.aborted) break;
        const wait = backoff.next();
        ctx.err(
          `ep: ${new Date().toISOString()} event stream lost (${(err as Error).message}); ` +
            `reconnecting in ${wait / 1000} s${lastId ? ` after id ${lastId}` : ""}`,
        );
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, wait);
          stop.signal.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true });
        });
      }
    }
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
  return 0;
}
