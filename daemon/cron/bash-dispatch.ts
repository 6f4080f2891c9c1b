// `dispatch = "bash"`: the prompt is a literal command for `bash -c`, with no session and no LLM.
// Output (stdout and stderr interleaved) is kept bounded; the exit code goes to the history.
import { spawn } from "node:child_process";
import type { Clock, ClockTimer } from "../../common/clock.js";
import { systemClock } from "../../common/clock.js";
import type { CronJob } from "./cron-file.js";

export interface CronDispatchResult {
  status: "ok" | "failed";
  exitCode?: number;
  output?: string;
  error?: string;
}

export interface CronDispatchContext {
  /** Aborted when the dispatcher closes; long runs should stop. */
  signal: AbortSignal;
}

export type CronDispatch = (job: CronJob, slotMs: number, ctx: CronDispatchContext) => Promise<CronDispatchResult>;

export interface BashOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Kill the command's process group after this long (default 10 minutes). */
  timeoutMs?: number;
  /** Output kept, from the end (default 16 KiB). */
  maxOutputBytes?: number;
  /** After SIGTERM, wait this long before SIGKILL (default 2 s). */
  killGraceMs?: number;
  signal?: AbortSignal;
  clock?: Clock;
  bashPath?: string;
}

/** Keeps the last `max` bytes of a stream, counting what it dropped. */
function tailBuffer(max: number) {
  const chunks: Buffer[] = [];
  let size = 0;
  let dropped = 0;
  return {
    push(chunk: Buffer) {
      chunks.push(chunk);
      size += chunk.length;
      while (size > max && chunks.length) {
        const over = size - max;
        const first = chunks[0];
        if (first.length <= over) {
          chunks.shift();
          size -= first.length;
          dropped += first.length;
        } else {
          chunks[0] = first.subarray(over);
          size -= over;
          dropped += over;
        }
      }
    },
    text(): string {
      const body = Buffer.concat(chunks).toString("utf8");
      return dropped ? `[… ${dropped} earlier bytes dropped]\n${body}` : body;
    },
  };
}

/** Runs `bash -c <command>` in its own process group; never rejects. */
export function runBash(command: string, opts: BashOptions = {}): Promise<CronDispatchResult> {
  const clock = opts.clock ?? systemClock;
  const out = tailBuffer(opts.maxOutputBytes ?? 16 * 1024);
  return new Promise((resolve) => {
    let child;
    try {
      // One pipe for both streams keeps stdout and stderr lines in the order they were written.
      child = spawn(opts.bashPath ?? "bash", ["-c", `exec 2>&1\n${command}`], {
        cwd: opts.cwd,
        env: opts.env ?? process.env,
        detached: true,
        stdio: ["ignore", "pipe", "ignore"],
      });
    } catch (err) {
      resolve({ status: "failed", error: `cannot start bash: ${(err as Error).message}` });
      return;
    }
    let stopReason: string | undefined;
    let killTimer: ClockTimer | undefined;
    const killGroup = (sig: NodeJS.Signals) => {
      try {
        if (child.pid) process.kill(-child.pid, sig);
      } catch {
        // already gone
      }
    };
    const stop = (reason: string) => {
      if (stopReason) return;
      stopReason = reason;
      killGroup("SIGTERM");
      killTimer = clock.setTimeout(() => killGroup("SIGKILL"), opts.killGraceMs ?? 2_000);
    };
    const timeoutMs = opts.timeoutMs ?? 10 * 60_000;
    const timeout = clock.setTimeout(() => stop(`timed out after ${timeoutMs} ms`), timeoutMs);
    const onAbort = () => stop("cancelled: the cron dispatcher closed");
    if (opts.signal?.aborted) onAbort();
    opts.signal?.addEventListener("abort", onAbort, { once: true });

    let settled = false;
    child.stdout.on("data", (c: Buffer) => out.push(c));
    child.on("error", (err) => {
      if (settled) return;
      settled = true;
      clock.clearTimeout(timeout);
      opts.signal?.removeEventListener("abort", onAbort);
      resolve({ status: "failed", output: out.text(), error: `cannot run bash: ${err.message}` });
    });
    const finish = (code: number | null, signal: NodeJS.Signals | null) => {
      if (settled) return;
      settled = true;
      clock.clearTimeout(timeout);
      if (killTimer) clock.clearTimeout(killTimer);
      opts.signal?.removeEventListener("abort", onAbort);
      child.stdout.destroy();
      const output = out.text();
      if (stopReason) {
        resolve({ status: "failed", ...(code !== null ? { exitCode: code } : {}), output, error: stopReason });
      } else if (code === 0) {
        resolve({ status: "ok", exitCode: 0, output });
      } else if (code !== null) {
        resolve({ status: "failed", exitCode: code, output, error: `exited with code ${code}` });
      } else {
        resolve({ status: "failed", output, error: `killed by ${signal}` });
      }
    };
    child.on("exit", (code, signal) => {
      // Leave nothing of the group behind (background jobs of the command), then collect the
      // remaining output; a pipe held open by an escaped process does not hold the result back.
      killGroup("SIGKILL");
      const late = clock.setTimeout(() => finish(code, signal), 1_000);
      child.on("close", () => {
        clock.clearTimeout(late);
        finish(code, signal);
      });
    });
  });
}

export interface JobDispatchDeps {
  /** `dispatch = "signal"`: deliver the prompt to the job's session (the daemon's `ep agent signal`). */
  signal: (job: CronJob & { session: string }, slotMs: number, ctx: CronDispatchContext) => Promise<CronDispatchResult>;
  bash?: Omit<BashOptions, "signal">;
}

/** The dispatch callback for createCronDispatcher: routes each job by its `dispatch` mode. */
export function createJobDispatch(deps: JobDispatchDeps): CronDispatch {
  return (job, slotMs, ctx) => {
    if (job.dispatch === "bash") return runBash(job.prompt, { ...deps.bash, signal: ctx.signal });
    return deps.signal(job as CronJob & { session: string }, slotMs, ctx);
  };
}
