// Attach sessions: one per attached thing (a tmux pane, or an agent's one-shot runs), each with
// a bounded ring buffer of what it printed and any number of viewers. A viewer is a WebSocket
// speaking the attach protocol (frames.ts), from epd.sock or from the tower's dial-back.
import type { WebSocket } from "ws";
import type { Clock, ClockTimer } from "../../common/clock.js";
import { EpError, toEpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import type { ProgressFrame, RunHandle, RunResult, RunSpec } from "../runtimes/runtime.js";
import type { RuntimeRegistry } from "../runtimes/registry.js";
import { CLOSE, closeCodeOf, frameText, parseClientFrame, type AttachMode, type ControlFrame } from "./frames.js";
import { createRingBuffer, type RingBuffer } from "./ring-buffer.js";
import { openTmuxSource, type SourceExit, type TerminalSource } from "./tmux-source.js";

/** What an attach request resolved to on this node. */
export type AttachTarget =
  | { kind: "tmux"; agentId: string; session: string; socketName?: string }
  | { kind: "run"; agentId: string };

export interface ViewerOptions {
  mode: AttachMode;
  cols: number;
  rows: number;
  /** Resume: the offset the viewer reached before it lost its connection. */
  since?: number;
}

export interface AttachHubOptions {
  clock: Clock;
  log: Logger;
  /** Ring buffer of a tmux session (default 1 MiB) and of an agent's run output (default 256 KiB). */
  ringBytes?: number;
  runRingBytes?: number;
  /** How long a tmux client is kept after its last viewer left, so a reconnect resumes (default 60 s). */
  lingerMs?: number;
  /** A viewer with no traffic either way for this long is closed (default 30 min). */
  idleMs?: number;
  /** Bytes queued for one viewer before the source is paused (tmux) or the viewer dropped (runs). */
  highWaterBytes?: number;
  env?: NodeJS.ProcessEnv;
}

export interface RunInfo {
  taskId: string;
  runtime: string;
}

export interface AttachHub {
  /** Serves one viewer on `ws` until either side ends. Errors become an error frame and a close. */
  attach(ws: WebSocket, target: AttachTarget, opts: ViewerOptions): Promise<void>;
  /** Tees every run's frames into its agent's follow session. */
  wrapRuntimes(registry: RuntimeRegistry): RuntimeRegistry;
  /** The run in progress for an agent, if any. */
  currentRun(agentId: string): RunInfo | undefined;
  /** Agents that ran something since the daemon started. */
  hasRuns(agentId: string): boolean;
  /** Open sessions and their viewers (status, tests). */
  stats(): { key: string; viewers: number; bytes: number }[];
  close(): Promise<void>;
}

export interface Viewer {
  ws: WebSocket;
  mode: AttachMode;
  lastActive: number;
  idleTimer?: ClockTimer;
}

export interface Session {
  key: string;
  target: AttachTarget;
  ring: RingBuffer;
  viewers: Set<Viewer>;
  source?: TerminalSource;
  /** tmux: set while the tmux client starts */
  opening?: Promise<void>;
  linger?: ClockTimer;
  run?: RunInfo;
  paused: boolean;
  drainTimer?: ClockTimer;
}

const CRLF = /\r?\n/g;

const keyOf = (t: AttachTarget) => (t.kind === "tmux" ? `tmux:${t.socketName ?? ""}:${t.session}` : `run:${t.agentId}`);

/** The open attach sessions by key, each with its ring, source and viewers. */
export class AttachSessions {
  readonly map = new Map<string, Session>();
  closed = false;
  readonly ringBytes: number;
  readonly runRingBytes: number;
  private readonly lingerMs: number;
  private readonly idleMs: number;
  private readonly highWater: number;

  constructor(private readonly o: AttachHubOptions) {
    this.ringBytes = o.ringBytes ?? 1024 * 1024;
    this.runRingBytes = o.runRingBytes ?? 256 * 1024;
    this.lingerMs = o.lingerMs ?? 60_000;
    this.idleMs = o.idleMs ?? 30 * 60_000;
    this.highWater = o.highWaterBytes ?? 1024 * 1024;
  }

  control(ws: WebSocket, f: ControlFrame) {
    if (ws.readyState === ws.OPEN) ws.send(frameText(f));
  }

  endViewer(s: Session, v: Viewer, code: number, reason: string) {
    if (!s.viewers.delete(v)) return;
    if (v.idleTimer) this.o.clock.clearTimeout(v.idleTimer);
    if (v.ws.readyState === v.ws.OPEN || v.ws.readyState === v.ws.CONNECTING) v.ws.close(code, reason.slice(0, 120));
    if (s.viewers.size === 0) this.lingerOrKeep(s);
  }

  /** tmux clients wait a while for a reconnect, then detach; run sessions live as long as the daemon. */
  lingerOrKeep(s: Session) {
    if (s.target.kind !== "tmux" || s.linger) return;
    s.linger = this.o.clock.setTimeout(() => {
      s.linger = undefined;
      if (s.viewers.size === 0) this.dropSession(s);
    }, this.lingerMs);
  }

  dropSession(s: Session) {
    if (this.map.get(s.key) === s) this.map.delete(s.key);
    if (s.linger) this.o.clock.clearTimeout(s.linger);
    if (s.drainTimer) this.o.clock.clearTimeout(s.drainTimer);
    s.source?.close();
  }

  armIdle(s: Session, v: Viewer) {
    v.idleTimer = this.o.clock.setTimeout(
      () => {
        const quiet = this.o.clock.now() - v.lastActive;
        if (quiet >= this.idleMs) {
          this.control(v.ws, {
            type: "error",
            code: "idle_timeout",
            message: `no input or output for ${Math.round(this.idleMs / 1000)} s; attach again to continue`,
          });
          this.endViewer(s, v, CLOSE.idle, "idle");
        } else this.armIdle(s, v);
      },
      Math.max(1, this.idleMs - (this.o.clock.now() - v.lastActive)),
    );
  }

  /** Output to every viewer; a viewer far behind pauses the PTY (tmux) or is dropped (runs). */
  broadcast(s: Session, chunk: Buffer) {
    s.ring.push(chunk);
    const now = this.o.clock.now();
    for (const v of s.viewers) {
      if (v.ws.readyState !== v.ws.OPEN) continue;
      v.ws.send(chunk, { binary: true });
      v.lastActive = now;
      if (v.ws.bufferedAmount > this.highWater) {
        if (s.source?.kind === "tmux") this.pauseUntilDrained(s);
        else if (v.ws.bufferedAmount > 8 * this.highWater) {
          this.control(v.ws, {
            type: "error",
            code: "slow_consumer",
            message: "the viewer fell too far behind the run's output; attach again to resume",
          });
          this.endViewer(s, v, CLOSE.slow_consumer, "slow consumer");
        }
      }
    }
  }

  pauseUntilDrained(s: Session) {
    if (s.paused || !s.source) return;
    s.paused = true;
    s.source.pause();
    const check = () => {
      s.drainTimer = undefined;
      const behind = [...s.viewers].some(
        (v) => v.ws.readyState === v.ws.OPEN && v.ws.bufferedAmount > this.highWater / 2,
      );
      if (behind) s.drainTimer = this.o.clock.setTimeout(check, 5);
      else {
        s.paused = false;
        s.source?.resume();
      }
    };
    s.drainTimer = this.o.clock.setTimeout(check, 5);
  }

  exitAll(s: Session, info: SourceExit) {
    this.o.log.info("attach source ended", {
      key: s.key,
      reason: info.reason,
      exit_code: info.exitCode,
      viewers: s.viewers.size,
    });
    const frame: ControlFrame = {
      type: "exit",
      reason: info.reason,
      ...(info.exitCode !== undefined ? { exit_code: info.exitCode } : {}),
      ...(info.signal ? { signal: info.signal } : {}),
    };
    for (const v of [...s.viewers]) {
      this.control(v.ws, frame);
      this.endViewer(s, v, CLOSE.normal, "exited");
    }
    this.dropSession(s);
  }

  async sessionFor(target: AttachTarget, cols: number, rows: number): Promise<Session> {
    const key = keyOf(target);
    let s = this.map.get(key);
    if (!s) {
      s = {
        key,
        target,
        ring: createRingBuffer(target.kind === "tmux" ? this.ringBytes : this.runRingBytes),
        viewers: new Set(),
        paused: false,
      };
      this.map.set(key, s);
      if (target.kind === "tmux") {
        const session = s;
        session.opening = openTmuxSource(
          { socketName: target.socketName, session: target.session, cols, rows, env: this.o.env },
          { data: (chunk) => this.broadcast(session, chunk), exit: (info) => this.exitAll(session, info) },
        ).then(
          (src) => {
            session.source = src;
            session.opening = undefined;
            if (this.closed || this.map.get(key) !== session) src.close();
          },
          (err) => {
            this.map.delete(key);
            throw err;
          },
        );
      }
    }
    if (s.opening) await s.opening;
    return s;
  }

  onViewerMessage(s: Session, v: Viewer, data: Buffer, isBinary: boolean) {
    v.lastActive = this.o.clock.now();
    if (isBinary) {
      // a read-only viewer's keystrokes go nowhere
      if (v.mode === "rw" && s.source?.writable) s.source.write(data);
      return;
    }
    let f: ControlFrame;
    try {
      f = parseClientFrame(data.toString("utf8"));
    } catch (err) {
      this.control(v.ws, { type: "error", code: toEpError(err).code, message: toEpError(err).message });
      return;
    }
    if (f.type === "resize" && v.mode === "rw" && s.source?.writable) {
      s.source.resize(f.cols, f.rows);
    }
  }
}

export function createAttachHub(o: AttachHubOptions): AttachHub {
  const { clock } = o;
  const ss = new AttachSessions(o);
  const sessions = ss.map;
  const control = (ws: WebSocket, f: ControlFrame) => ss.control(ws, f);

  const hub: AttachHub = {
    async attach(ws, target, opts) {
      let s: Session;
      try {
        if (ss.closed) throw new EpError("unavailable", "the daemon is shutting down");
        s = await ss.sessionFor(target, opts.cols, opts.rows);
      } catch (err) {
        const ep = toEpError(err);
        control(ws, { type: "error", code: ep.code, message: ep.message });
        ws.close(closeCodeOf(ep), ep.code);
        return;
      }
      if (ws.readyState !== ws.OPEN) return;
      if (s.linger) {
        clock.clearTimeout(s.linger);
        s.linger = undefined;
      }
      const mode: AttachMode = s.source?.writable || target.kind === "tmux" ? opts.mode : "ro";
      const v: Viewer = { ws, mode, lastActive: clock.now() };
      // what the viewer missed (resume) or everything the ring holds (a new viewer)
      const from = opts.since ?? 0;
      const replay = s.ring.since(from);
      const reset = opts.since === undefined || replay.lost;
      control(ws, {
        type: "hello",
        agent_id: target.agentId,
        target: target.kind,
        ...(target.kind === "tmux" ? { session: target.session } : {}),
        mode,
        cols: opts.cols,
        rows: opts.rows,
        offset: replay.offset,
        replay: replay.data.length,
        reset,
      });
      if (replay.data.length) ws.send(replay.data, { binary: true });
      if (s.run) control(ws, { type: "run", task_id: s.run.taskId, runtime: s.run.runtime });
      s.viewers.add(v);
      ss.armIdle(s, v);
      ws.on("message", (data: Buffer, isBinary: boolean) => ss.onViewerMessage(s, v, data, isBinary));
      ws.on("close", () => ss.endViewer(s, v, CLOSE.normal, "closed"));
      ws.on("error", () => ss.endViewer(s, v, CLOSE.internal, "error"));
      if (s.source?.kind === "tmux" && mode === "rw") s.source.resize(opts.cols, opts.rows);
      // a screen the ring no longer holds in full is drawn again by tmux
      if (s.source?.kind === "tmux" && reset && s.ring.start() > 0) s.source.redraw();
    },

    wrapRuntimes(registry) {
      const feed = (agentId: string): Session => {
        const key = `run:${agentId}`;
        let s = sessions.get(key);
        if (!s) {
          s = {
            key,
            target: { kind: "run", agentId },
            ring: createRingBuffer(ss.runRingBytes),
            viewers: new Set(),
            paused: false,
          };
          sessions.set(key, s);
        }
        return s;
      };
      const text = (f: ProgressFrame) =>
        Buffer.from(`${f.kind === "text" ? "" : `[${f.kind}] `}${f.text.replace(CRLF, "\r\n")}\r\n`);
      return {
        ...registry,
        // a getter: the registry's config changes on config_reload
        get config() {
          return registry.config;
        },
        start(kind: string, spec: RunSpec): RunHandle {
          const s = feed(spec.agentId);
          const run: RunInfo = { taskId: spec.taskId, runtime: kind };
          const handle = registry.start(kind, {
            ...spec,
            onFrame(f) {
              spec.onFrame(f);
              if (s.run === run) ss.broadcast(s, text(f));
            },
          });
          s.run = run;
          ss.broadcast(s, Buffer.from(`\r\n\x1b[2m── run ${spec.taskId} (${kind}) started ──\x1b[0m\r\n`));
          for (const v of s.viewers) control(v.ws, { type: "run", task_id: spec.taskId, runtime: kind });
          void handle.result.then((r: RunResult) => {
            if (s.run === run) s.run = undefined;
            ss.broadcast(s, runEndLine(spec.taskId, r));
            const frame = runExitFrame(spec.taskId, r);
            // followers stay attached for the agent's next run
            for (const v of s.viewers) control(v.ws, frame);
          });
          return handle;
        },
      };
    },

    currentRun: (agentId) => sessions.get(`run:${agentId}`)?.run,
    hasRuns: (agentId) => sessions.has(`run:${agentId}`),
    stats: () => [...sessions.values()].map((s) => ({ key: s.key, viewers: s.viewers.size, bytes: s.ring.end() })),

    async close() {
      ss.closed = true;
      // closing: wait for opens, their errors went to their callers
      const opening = [...sessions.values()].map((s) => s.opening?.catch(() => undefined));
      for (const s of [...sessions.values()]) {
        for (const v of [...s.viewers]) {
          control(v.ws, { type: "error", code: "unavailable", message: "the daemon is shutting down" });
          ss.endViewer(s, v, CLOSE.going_away, "shutting down");
        }
        ss.dropSession(s);
      }
      await Promise.all(opening);
      sessions.clear();
    },
  };
  return hub;
}

/** The line a follower sees when a run ends. */
function runEndLine(taskId: string, r: RunResult): Buffer {
  const status =
    r.exitCode !== undefined ? `exit ${r.exitCode}` : r.signal ? `signal ${r.signal}` : r.ok ? "ok" : "failed";
  return Buffer.from(
    `\x1b[2m── run ${taskId} ended: ${status}${r.error ? ` (${r.error.replace(CRLF, " ")})` : ""} ──\x1b[0m\r\n`,
  );
}

/** The exit frame of a run (followers stay attached for the agent's next run). */
function runExitFrame(taskId: string, r: RunResult): ControlFrame {
  return {
    type: "exit",
    task_id: taskId,
    reason: r.cancelled ? "cancelled" : r.timedOut ? "timed out" : r.ok ? "succeeded" : (r.error ?? "failed"),
    ...(r.exitCode !== undefined ? { exit_code: r.exitCode } : {}),
    ...(r.signal ? { signal: r.signal } : {}),
  };
}
