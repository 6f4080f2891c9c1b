// A tmux pane as an attach source: one PTY per attached pane runs `tmux -u attach-session`, so
// several viewers share one tmux client (their keystrokes, one size) and the pane itself keeps
// running when everybody leaves.
import pty, { type IPty } from "node-pty";
import { EpError } from "../../common/errors.js";
import { runTmux, tmuxPaneState, tmuxSessionExists, type TmuxOptions } from "../runtimes/tmux.js";

export interface SourceExit {
  exitCode?: number;
  signal?: string;
  reason: string;
}

/** What an attach session reads from and writes to. */
export interface TerminalSource {
  readonly kind: "tmux" | "run";
  /** tmux session name (tmux sources). */
  readonly session?: string;
  /** False for sources nobody can type into (one-shot runs). */
  readonly writable: boolean;
  write(data: Buffer | string): void;
  resize(cols: number, rows: number): void;
  /** Stop reading (flow control: a viewer is behind) and start again. */
  pause(): void;
  resume(): void;
  /** Makes the program redraw its whole screen for a viewer who joined late. */
  redraw(): void;
  close(): void;
}

export interface SourceEvents {
  data(chunk: Buffer): void;
  exit(info: SourceExit): void;
}

export interface TmuxSourceOptions extends TmuxOptions {
  session: string;
  cols: number;
  rows: number;
  env?: NodeJS.ProcessEnv;
}

/** Starts a tmux client on the session's pane; not_found when the session is not running. */
export async function openTmuxSource(o: TmuxSourceOptions, on: SourceEvents): Promise<TerminalSource> {
  const tmux: TmuxOptions = { socketName: o.socketName, tmuxPath: o.tmuxPath };
  if (!(await tmuxSessionExists(o.session, tmux))) {
    throw new EpError("not_found", `the tmux session '${o.session}' is not running on this node`, {
      session: o.session,
    });
  }
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(o.env ?? process.env))
    if (v !== undefined && k !== "TMUX" && k !== "TMUX_PANE") env[k] = v;
  env.TERM = "xterm-256color";
  const args = [...(o.socketName ? ["-L", o.socketName] : []), "-u", "attach-session", "-t", `=${o.session}`];
  const term: IPty = pty.spawn(o.tmuxPath ?? "tmux", args, {
    name: "xterm-256color",
    cols: o.cols,
    rows: o.rows,
    cwd: process.cwd(),
    env,
    encoding: null,
  });
  let closed = false;
  // node-pty hands Buffers when encoding is null; the typings only say string
  term.onData((d: string | Buffer) => on.data(typeof d === "string" ? Buffer.from(d) : d));
  term.onExit(({ exitCode, signal }) => {
    void (async () => {
      // a pane kept by remain-on-exit still knows how its program ended
      // a pane that is gone ends the source (below)
      const state = await tmuxPaneState(o.session, tmux).catch(() => undefined);
      if (state?.dead) {
        on.exit({
          exitCode: state.exitStatus,
          ...(state.exitSignal ? { signal: String(state.exitSignal) } : {}),
          reason: "the pane's program exited",
        });
      } else if (state) {
        on.exit({
          reason: closed ? "detached" : `the tmux client ended (exit ${exitCode}${signal ? `, signal ${signal}` : ""})`,
        });
      } else {
        on.exit({ reason: "the tmux session ended" });
      }
    })();
  });
  const ptsName = (term as unknown as { ptsName?: string }).ptsName;
  return {
    kind: "tmux",
    session: o.session,
    writable: true,
    write: (data) => {
      if (!closed) term.write(data);
    },
    resize(cols, rows) {
      if (!closed) term.resize(cols, rows);
    },
    pause: () => term.pause(),
    resume: () => term.resume(),
    redraw() {
      // a redraw hint only: a client that went away needs none
      if (!closed && ptsName) void runTmux(["refresh-client", "-t", ptsName], tmux).catch(() => undefined);
    },
    close() {
      if (closed) return;
      closed = true;
      term.kill();
    },
  };
}
