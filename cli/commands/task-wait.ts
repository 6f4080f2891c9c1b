// `ep task submit --wait`: the task as it ended. It follows the tower's event stream for the task
// (`/events/stream?type=matrix&task_id=`) and reads the task once the stream says it ended, so the
// answer comes as soon as the tower has it. The stream starts at the tower's newest event when it
// is admitted, before its response headers: the task is read once after that, which catches an end
// that came between the create and the subscription. A stream that cannot be opened or drops is
// said on stderr, and the task is then read every 250 ms until it ends.
import { request as httpRequest, type IncomingMessage } from "node:http";
import { GetTaskResponseSchema, WorkService } from "../../gen/ep/tower/v1/work_pb.js";
import type { Context } from "../context.js";
import type { Row } from "../output.js";
import { protoJson, tower } from "../tower.js";
import { createSseParser } from "../../common/sse.js";

const FINAL = new Set(["succeeded", "failed", "cancelled"]);
const POLL_MS = 250;

/** Resolves with the task (proto JSON, snake_case) once its status is final. */
export async function waitForTaskEnd(ctx: Context, taskId: string): Promise<Row> {
  const work = tower(ctx, WorkService);
  const read = async () => protoJson(GetTaskResponseSchema, await work.getTask({ taskId })).task as Row;
  const stop = new AbortController();
  try {
    let body: AsyncIterable<Uint8Array>;
    try {
      body = await openTaskStream(ctx, taskId, stop.signal);
    } catch (err) {
      ctx.err(
        `ep: cannot follow the task's events (${(err as Error).message}); reading the task every ${POLL_MS} ms instead`,
      );
      return await poll(read);
    }
    const now = await read();
    if (FINAL.has(String(now.status))) return now;
    try {
      if (await endSeen(body, taskId)) return await read();
      throw new Error("the stream ended");
    } catch (err) {
      ctx.err(
        `ep: the event stream was lost (${(err as Error).message}); reading the task every ${POLL_MS} ms instead`,
      );
      return await poll(read);
    }
  } finally {
    stop.abort();
  }
}

/**
 * The stream of the task's state changes, once the tower has admitted it (its headers came).
 * node:http rather than fetch: an aborted fetch keeps the process alive for 50–200 ms more.
 */
async function openTaskStream(ctx: Context, taskId: string, signal: AbortSignal): Promise<AsyncIterable<Uint8Array>> {
  const headers: Record<string, string> = { accept: "text/event-stream" };
  const token = ctx.token();
  if (token) headers.authorization = `Bearer ${token}`;
  const url = `${ctx.url()}/events/stream?type=matrix&task_id=${encodeURIComponent(taskId)}`;
  const request = url.startsWith("https:") ? (await import("node:https")).request : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(url, { headers, signal, agent: false }, (res: IncomingMessage) => {
      if (res.statusCode === 200) return resolve(res);
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => (body += d));
      res.on("end", () => reject(new Error(`HTTP ${res.statusCode}${errorMessage(body)}`)));
    });
    req.on("error", reject);
    req.end();
  });
}

const errorMessage = (body: string): string => {
  try {
    const message = (JSON.parse(body) as { error?: { message?: string } }).error?.message;
    return message ? `: ${message}` : "";
  } catch {
    return "";
  }
};

/** True once the stream carries the task's final state change; false when the stream ends before. */
async function endSeen(body: AsyncIterable<Uint8Array>, taskId: string): Promise<boolean> {
  const parser = createSseParser();
  const decoder = new TextDecoder();
  for await (const chunk of body) {
    for (const msg of parser.push(decoder.decode(chunk, { stream: true }))) {
      if (msg.event === "error")
        throw new Error(
          (JSON.parse(msg.data) as { error?: { message?: string } }).error?.message ?? "the tower ended the stream",
        );
      if (!msg.id || !msg.data) continue;
      const e = JSON.parse(msg.data) as { name?: string; task_id?: string; status?: string };
      if (e.task_id === taskId && String(e.name).startsWith("task.") && FINAL.has(String(e.status))) return true;
    }
  }
  return false;
}

async function poll(read: () => Promise<Row>): Promise<Row> {
  for (;;) {
    const t = await read();
    if (FINAL.has(String(t.status))) return t;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}
