// muxhost_hosted: a run inside a detached tmux session, so an operator can attach and watch or
// type. The pane's output is piped to a log file and read as text frames; the run ends when the
// pane's process exits (its status is kept by remain-on-exit) and the session is then removed.
import { runEnv } from "./runtime.js";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { constants, tmpdir } from "node:os";
import { join } from "node:path";
import type { Clock, ClockTimer } from "../../common/clock.js";
import { EpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import { openPanePipe, type PanePipe } from "./pane-pipe.js";
import { createLineSplitter, createTailBuffer, fillArgs, resolveExecutable, terminateGroup } from "./process-group.js";
import { checkCwd, formatSeconds, missingRuntime, settledHandle, templateValues } from "./process-runtime.js";
import type { ProgressFrame, RunHandle, RunResult, RunSpec, RuntimeAdapter } from "./runtime.js";
import type { MuxhostRuntimeConfig } from "./runtimes-config.js";
import { confineCommand } from "./confine.js";
import {
  stripAnsi,
  tmuxInstalled,
  tmuxKillSession,
  tmuxNewSession,
  tmuxPaneState,
  tmuxSessionExists,
  tmuxSessionName,
  type TmuxOptions,
} from "./tmux.js";

/** The tmux session a task's run lives in (attach with `tmux attach -t <name>`). */
export function taskSessionName(taskId: string): string {
  return tmuxSessionName(`ep-task-${taskId}`);
}

export function createMuxhostHostedRuntime(
  config: MuxhostRuntimeConfig,
  deps: { clock: Clock; logger: Logger },
): RuntimeAdapter {
  const tmux: TmuxOptions = { socketName: config.socketName };
  return {
    kind: "muxhost_hosted",
    async check(env = process.env) {
      if (!tmuxInstalled(env))
        return { ok: false, detail: "tmux was not found on this node's PATH; install tmux to use muxhost_hosted" };
      const path = resolveExecutable(config.command, env);
      return path
        ? { ok: true, detail: path }
        : { ok: false, detail: missingRuntime("muxhost_hosted", config.command).error! };
    },
    start(spec) {
      const invalid = checkCwd(spec);
      if (invalid) return settledHandle({ ok: false, output: "", error: invalid.message, errorCode: invalid.code });
      const env = runEnv(config.env, spec.env);
      if (!tmuxInstalled(env)) {
        const err = new EpError(
          "runtime_missing",
          "runtime muxhost_hosted: tmux was not found on this node's PATH; install tmux",
        );
        return settledHandle({ ok: false, output: "", error: err.message, errorCode: err.code });
      }
      const executable = resolveExecutable(config.command, env, spec.cwd);
      if (!executable) return settledHandle(missingRuntime("muxhost_hosted", config.command));
      // the process in the pane is confined like any agent's (confine.ts); tmux and the status wrapper are not
      const line = confineCommand({
        permission: spec.permission ?? config.permission,
        cwd: spec.cwd,
        places: spec.places,
        env,
        command: [executable, ...fillArgs(config.taskArgs, templateValues(spec))],
      });
      if (line instanceof EpError)
        return settledHandle({
          ok: false,
          output: "",
          error: `runtime muxhost_hosted: ${line.message}`,
          errorCode: line.code,
        });
      return runInPane(spec, config, env, line, tmux, deps);
    },
  };
}

const OUTPUT_LIMIT = 1024 * 1024;

/** Runs the program and records its exit status in the file named by $1 (128+n for signal n). */
const STATUS_WRAPPER = 'f=$1; shift; "$@"; s=$?; echo "$s" > "$f"; exit "$s"';

async function readStatusFile(path: string): Promise<number | undefined> {
  try {
    const text = (await readFile(path, "utf8")).trim();
    return /^\d+$/.test(text) ? Number(text) : undefined;
  } catch {
    return undefined;
  }
}

function signalName(signo: number): string {
  const entry = Object.entries(constants.signals).find(([, n]) => n === signo);
  return entry ? entry[0] : `signal ${signo}`;
}

function runInPane(
  spec: RunSpec,
  config: MuxhostRuntimeConfig,
  env: Record<string, string>,
  command: string[],
  tmux: TmuxOptions,
  deps: { clock: Clock; logger: Logger },
): RunHandle {
  const { clock } = deps;
  const log = deps.logger.child({ runtime: "muxhost_hosted", task_id: spec.taskId });
  const session = taskSessionName(spec.taskId);
  const graceMs = config.killGraceSeconds * 1000;
  const timeoutMs = spec.timeoutMs ?? config.timeoutSeconds * 1000;
  const output = createTailBuffer(OUTPUT_LIMIT);
  let panePid: number | undefined;
  let stop: { cancelled?: true; timedOut?: true; error: string } | undefined;
  let stopping: Promise<void> | undefined;
  let timer: ClockTimer | undefined;

  const emit = (frame: ProgressFrame) => {
    try {
      spec.onFrame(frame);
    } catch (err) {
      log.warn("progress frame handler threw", { error: (err as Error).message });
    }
  };
  const lines = createLineSplitter((raw) => {
    const line = stripAnsi(raw);
    output.append(line + "\n");
    if (line.trim()) emit({ kind: "text", text: line });
  });

  const halt = (reason: NonNullable<typeof stop>) => {
    if (stop) return;
    stop = reason;
    log.info(reason.cancelled ? "run cancelled" : "run timed out", { session, pid: panePid });
    if (panePid !== undefined) stopping = terminateGroup(panePid, graceMs, clock);
  };

  const sleep = (ms: number) => new Promise<void>((r) => clock.setTimeout(r, ms));

  const run = async (): Promise<RunResult> => {
    const dir = await mkdtemp(join(tmpdir(), "ep-pane-"));
    const statusFile = join(dir, "status");
    let pipe: PanePipe | undefined;
    try {
      // the pane's output comes through a FIFO straight into memory: it never touches the disk
      // output that comes before the run's status frame waits for it (frames keep that order)
      let early: string[] | undefined = [];
      pipe = openPanePipe(join(dir, "pane.fifo"), (text) => (early ? early.push(text) : lines.push(text)));
      if (await tmuxSessionExists(session, tmux)) {
        log.warn("replacing a stale tmux session of this task", { session });
        await tmuxKillSession(session, tmux);
      }
      await tmuxNewSession({
        ...tmux,
        session,
        executable: "/bin/sh",
        args: ["-c", STATUS_WRAPPER, "ep-pane", statusFile, ...command],
        cwd: spec.cwd,
        env,
        remainOnExit: true,
        logFile: pipe.path,
      });
      const first = await tmuxPaneState(session, tmux);
      panePid = first?.pid;
      emit({
        kind: "status",
        text: `running in tmux session ${session}`,
        data: { session, pid: panePid, socket: tmux.socketName ?? null },
      });
      for (const text of early) lines.push(text);
      early = undefined;
      if (stop && panePid !== undefined) stopping = terminateGroup(panePid, graceMs, clock);

      const { exitStatus, exitSignal, vanished } = await paneEnd(
        session,
        tmux,
        statusFile,
        config.pollIntervalMs,
        sleep,
      );
      await drained(pipe, config.pollIntervalMs, sleep);
      lines.end();
      if (stopping) await stopping;
      const text = output.text().replace(/\s+$/, "");
      const base: RunResult = { ok: false, output: text };
      if (exitStatus !== undefined) base.exitCode = exitStatus;
      if (exitSignal !== undefined) base.signal = signalName(exitSignal);
      if (stop) return { ...base, ...stop };
      if (vanished)
        return {
          ...base,
          error: `runtime muxhost_hosted: tmux session ${session} disappeared before its program ended`,
        };
      if (exitStatus === 0) return { ...base, ok: true };
      const how = exitSignal !== undefined ? `was killed by ${base.signal}` : `exited with code ${String(exitStatus)}`;
      return { ...base, error: `runtime muxhost_hosted: '${config.command}' ${how}` };
    } catch (err) {
      const e = err instanceof EpError ? err : new EpError("internal", (err as Error).message);
      return { ok: false, output: output.text(), error: e.message, errorCode: e.code };
    } finally {
      if (panePid !== undefined) await terminateGroup(panePid, graceMs, clock);
      await tmuxKillSession(session, tmux).catch(() => {}); // the session may be gone already: that is the goal
      pipe?.close({ remove: true });
      await rm(dir, { recursive: true, force: true });
    }
  };

  if (timeoutMs > 0) {
    timer = clock.setTimeout(
      () =>
        halt({
          timedOut: true,
          error: `runtime muxhost_hosted: timed out after ${formatSeconds(timeoutMs)}; the process group was killed`,
        }),
      timeoutMs,
    );
  }
  const result = run().finally(() => {
    if (timer) clock.clearTimeout(timer);
  });
  return {
    get pid() {
      return panePid;
    },
    result,
    cancel(reason) {
      halt({ cancelled: true, error: `cancelled${reason ? `: ${reason}` : ""}` });
      return result;
    },
  };
}

/** Polls the pane until its program ends (or the session vanishes): its exit status and signal. */
async function paneEnd(
  session: string,
  tmux: TmuxOptions,
  statusFile: string,
  pollMs: number,
  sleep: (ms: number) => Promise<void>,
) {
  for (;;) {
    const state = await tmuxPaneState(session, tmux);
    if (!state) return { exitStatus: undefined, exitSignal: undefined, vanished: true };
    if (state.dead) {
      // tmux sometimes marks a pane dead without ever learning its exit status; the wrapper's
      // status file is the reliable record, tmux's own status the fallback.
      return {
        exitStatus: (await readStatusFile(statusFile)) ?? state.exitStatus,
        exitSignal: state.exitSignal,
        vanished: false,
      };
    }
    await sleep(pollMs);
  }
}

/** tmux's pipe may still be passing on the last output: waits until it stops coming. */
async function drained(pipe: PanePipe, pollMs: number, sleep: (ms: number) => Promise<void>): Promise<void> {
  for (let i = 0; i < 10; i++) {
    const before = pipe.bytes;
    await sleep(Math.min(pollMs, 50));
    if (pipe.bytes === before && i > 0) return;
  }
}
