// ep task watch <id>: a task's header, then its progress as the agent produces it, then its output,
// like a CI job's live log. The stream (`/events/stream?task_id=`) is opened first; the frames so
// far are then read from the tower (ListEvents, one task's progress index) and the two are merged
// by event id, so a frame is printed once and in order. Ends when the task does: exit 0 when it
// succeeded, 1 when it failed or was cancelled. A dropped stream is resumed after the last id seen.
// The runtime's stderr lines are collapsed into a "N stderr lines" line unless --stderr asks for them
// (--json prints every frame).
import { RuntimeSchema, TaskStatus, TaskStatusSchema } from "../../gen/ep/tower/v1/resources_pb.js";
import { enumWord } from "../../common/vocab.js";
import { restJson } from "../../common/rest-json.js";
import type { JsonObject } from "@bufbuild/protobuf";
import { EpError } from "../../common/errors.js";
import { EventService } from "../../gen/ep/tower/v1/events_pb.js";
import { TaskSchema, type Task } from "../../gen/ep/tower/v1/resources_pb.js";
import { TaskWaitReasonSchema, TaskWaitSchema, WorkService, type TaskWait } from "../../gen/ep/tower/v1/work_pb.js";
import type { Context } from "../context.js";
import { tower } from "../tower.js";
import { towerNameBook } from "../name-book.js";
import { createBackoff, createSseParser } from "./events.js";
import { frameLine, isStderr, stderrSummary, type WatchFrame } from "../frames.js";
import { statusWithDenials } from "../denials.js";

export { frameLine };

const FINAL = new Set(["succeeded", "failed", "cancelled", "done"]);
const PAGE = 500;

/**
 * Whether the task's output is what its text frames already showed (a shell task's stdout is both),
 * so the watch does not print it twice. An agent's reply differs from its transcript and is printed.
 */
export function outputShown(stdoutText: string, output: string): boolean {
  const out = output.trim();
  return out !== "" && stdoutText.trim().endsWith(out);
}

function header(t: Task, agentName: (id: string) => string): string {
  const agent = t.claimedBy || t.assigneeAgentId;
  const who = agent ? agentName(agent) : "not claimed yet";
  return [
    `${t.title}  [${statusWord(t.status)}]`,
    `  task ${t.id} · agent ${who}${t.runtime ? ` · ${enumWord(RuntimeSchema, t.runtime)}` : ""} ` +
      `· attempt ${t.attempts} of ${t.maxAttempts}`,
  ].join("\n");
}

export async function watchTask(ctx: Context, taskId: string): Promise<number> {
  const work = tower(ctx, WorkService);
  const events = tower(ctx, EventService);
  const color = !ctx.json && Boolean(process.stdout.isTTY) && !process.env.NO_COLOR;
  const printer = createFramePrinter(ctx, color);
  const emit = printer.emit;

  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    let ended = false;
    const finish = () => finalReport(ctx, work, taskId, printer.end());

    // 0. the task exists and the tower answers (the usual errors: not found, unreachable, denied)
    const got = await work.getTask({ taskId });
    const first = got.task!;
    if (!ctx.json) {
      const book = towerNameBook(ctx);
      await book.load("agent");
      ctx.err(header(first, book.name));
    }
    // why it waits, now and whenever the task moves without ending (requeued, claimed)
    let waitSaid = "";
    const sayWait = (wait: TaskWait | undefined) => {
      const said = wait ? `${enumWord(TaskWaitReasonSchema, wait.reason)}: ${wait.message}` : "";
      if (said === waitSaid) return;
      waitSaid = said;
      if (!wait) return;
      if (ctx.json) ctx.out(JSON.stringify({ wait: restJson(TaskWaitSchema, wait) }));
      else ctx.err(`waiting: ${said}`);
    };
    sayWait(got.wait);

    // 1. the stream, before the replay, so nothing between the two is lost
    const url = `${ctx.url()}/events/stream?task_id=${encodeURIComponent(taskId)}`;
    const token = ctx.token();
    const backoff = createBackoff();
    let resumeAfter: number | undefined;
    const queue: Record<string, unknown>[] = [];
    let wake: (() => void) | undefined;
    const open = async (): Promise<AsyncIterable<Uint8Array>> => {
      const headers: Record<string, string> = { accept: "text/event-stream" };
      if (token) headers.authorization = `Bearer ${token}`;
      if (resumeAfter !== undefined) headers["last-event-id"] = String(resumeAfter);
      const res = await fetch(url, { headers, signal: stop.signal });
      if (res.status >= 400 && res.status < 500) {
        const body = (await res.json().catch(() => ({}))) as { error?: { message?: string } };
        throw new EpError("invalid_argument", `${url}: ${res.status} ${body.error?.message ?? res.statusText}`);
      }
      if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
      return res.body as unknown as AsyncIterable<Uint8Array>;
    };
    let body = await open();
    const pump = (async () => {
      while (!stop.signal.aborted && !ended) {
        try {
          const parser = createSseParser();
          const decoder = new TextDecoder();
          for await (const chunk of body) {
            backoff.reset();
            for (const msg of parser.push(decoder.decode(chunk, { stream: true }))) {
              if (!msg.data || !msg.id) continue;
              resumeAfter = Number(msg.id);
              queue.push({ ...(JSON.parse(msg.data) as Record<string, unknown>), id: Number(msg.id) });
              wake?.();
            }
          }
          throw new Error("the stream ended");
        } catch (err) {
          if (err instanceof EpError || stop.signal.aborted || ended) throw err;
          const wait = backoff.next();
          ctx.err(`ep: event stream lost (${(err as Error).message}); reconnecting in ${wait / 1000} s`);
          await new Promise((r) => setTimeout(r, wait));
          body = await open().catch(() => body);
        }
      }
    })();
    pump.catch(() => wake?.());

    // 2. what it printed so far, then where it stands now
    let after = 0n;
    for (;;) {
      const page = await events.listEvents({ afterId: after, limit: PAGE, filter: { taskId, types: ["progress"] } });
      for (const e of page.events) {
        const p = (e.payload ?? {}) as JsonObject;
        emit({
          id: Number(e.id),
          kind: String(p.kind ?? "text"),
          text: String(p.text ?? ""),
          data: p.data as Record<string, unknown> | undefined,
        });
      }
      if (page.events.length < PAGE) break;
      after = page.events[page.events.length - 1].id;
    }
    if (FINAL.has(statusWord(first.status)) || FINAL.has(statusWord((await work.getTask({ taskId })).task!.status))) {
      ended = true;
      return await finish();
    }

    // 3. live until the task ends
    for (;;) {
      while (queue.length) {
        const e = queue.shift()!;
        if (e.type === "progress") {
          const p = (e.payload ?? {}) as Record<string, unknown>;
          emit({
            id: Number(e.id),
            kind: String(p.kind ?? "text"),
            text: String(p.text ?? ""),
            data: p.data as Record<string, unknown> | undefined,
          });
        } else if (typeof e.status === "string" && FINAL.has(e.status) && String(e.name ?? "").startsWith("task.")) {
          ended = true;
          return await finish();
        } else if (String(e.name ?? "").startsWith("task.")) sayWait((await work.getTask({ taskId })).wait);
      }
      if (stop.signal.aborted) return 130;
      const failed = await Promise.race([
        new Promise<false>((r) => (wake = () => r(false))),
        pump.then(
          () => false,
          (err: unknown) => err,
        ),
      ]);
      wake = undefined;
      if (failed && !stop.signal.aborted) throw failed;
    }
  } finally {
    stop.abort();
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

/**
 * Prints each frame once (replay and live stream overlap), folding the runtime's stderr lines into
 * a count unless --stderr or --json; end() prints a count still held and returns the text frames
 * printed (to tell whether the output was already shown).
 */
function createFramePrinter(ctx: Context, color: boolean): { emit(f: WatchFrame): void; end(): string } {
  const printed = new Set<number>();
  let stdoutText = "";
  const collapse = !ctx.json && ctx.opts.stderr !== true;
  /** stderr lines held back since the last frame printed */
  let stderrHeld = 0;
  const showHeld = () => {
    if (stderrHeld > 0) ctx.out(stderrSummary(stderrHeld, color));
    stderrHeld = 0;
  };
  return {
    emit(f) {
      if (printed.has(f.id)) return;
      printed.add(f.id);
      if (collapse && isStderr(f)) {
        stderrHeld += 1;
        return;
      }
      showHeld();
      if (f.kind === "text" && !isStderr(f)) stdoutText += f.text.endsWith("\n") ? f.text : `${f.text}\n`;
      ctx.out(
        ctx.json
          ? JSON.stringify({ id: f.id, kind: f.kind, text: f.text, ...(f.data ? { data: f.data } : {}) })
          : frameLine(f, color),
      );
    },
    end() {
      showHeld();
      return stdoutText;
    },
  };
}

/** The task as it ended: its output (unless the stream showed it), its error, status and usage; the exit code. */
async function finalReport(
  ctx: Context,
  work: ReturnType<typeof tower<typeof WorkService>>,
  taskId: string,
  stdoutText: string,
): Promise<number> {
  const t = (await work.getTask({ taskId })).task!;
  if (ctx.json) ctx.out(JSON.stringify({ task: restJson(TaskSchema, t) }));
  else {
    if (t.result?.output && !outputShown(stdoutText, t.result.output))
      ctx.out(`\n${t.result.output.replace(/\n+$/, "")}`);
    if (t.result?.error) ctx.err(`\n${t.title}: ${statusWord(t.status)}: ${t.result.error}`);
    const u = t.result?.usage;
    const usage = u
      ? ` · ${u.inputTokens} tokens in, ${u.outputTokens} out${u.costUsd ? `, $${u.costUsd.toFixed(4)}` : ""}`
      : "";
    // a run with refusals is never a plain green: the last line says how many (each was printed as it happened)
    ctx.err(`\n${statusWithDenials(statusWord(t.status), t.result?.denials.length ?? 0)}${usage}`);
  }
  return t.status === TaskStatus.SUCCEEDED || t.status === TaskStatus.DONE ? 0 : 1;
}

const statusWord = (s: TaskStatus) => enumWord(TaskStatusSchema, s);
