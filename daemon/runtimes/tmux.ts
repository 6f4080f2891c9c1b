// Thin helpers over the tmux CLI, shared by the muxhost_hosted runtime, fleet supervision and cron
// (signals are send-keys into a profile's pane). Every helper takes the `-L` socket name so tests
// and private deployments never touch the user's own tmux server.
import { execFile } from "node:child_process";
import { EpError } from "../../common/errors.js";
import { resolveExecutable } from "./process-group.js";

export interface TmuxOptions {
  /** tmux `-L` socket name; undefined means the default server. */
  socketName?: string;
  /** tmux executable; default `tmux` on PATH. */
  tmuxPath?: string;
}

export interface TmuxResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs one tmux command line (`;`-separated commands allowed as separate arguments). */
export function runTmux(args: string[], opts: TmuxOptions = {}): Promise<TmuxResult> {
  const tmux = opts.tmuxPath ?? "tmux";
  const full = opts.socketName ? ["-L", opts.socketName, ...args] : args;
  return new Promise((resolveRun, reject) => {
    execFile(tmux, full, { encoding: "utf8", maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err && (err as NodeJS.ErrnoException).code === "ENOENT") {
        reject(
          new EpError("runtime_missing", "tmux was not found on this node's PATH; install tmux to use muxhost_hosted"),
        );
        return;
      }
      const code = err ? (typeof err.code === "number" ? err.code : 1) : 0;
      resolveRun({ code, stdout, stderr });
    });
  });
}

/** Fails with a readable error when tmux exits non-zero. */
async function tmuxOk(args: string[], opts: TmuxOptions, what: string): Promise<string> {
  const r = await runTmux(args, opts);
  if (r.code !== 0) throw new EpError("internal", `tmux ${what} failed: ${r.stderr.trim() || `exit code ${r.code}`}`);
  return r.stdout;
}

export function tmuxInstalled(env: Record<string, string | undefined> = process.env): boolean {
  return resolveExecutable("tmux", env) !== undefined;
}

/** Session names may not contain `.` or `:`; anything unusual becomes `_`. */
export function tmuxSessionName(raw: string): string {
  return raw.replace(/[^A-Za-z0-9_-]/g, "_");
}

/** `=name` matches the session exactly (no prefix match); `=name:` is its current pane. */
const sessionTarget = (session: string) => `=${session}`;
const paneTarget = (session: string) => `=${session}:`;

export async function tmuxSessionExists(session: string, opts: TmuxOptions = {}): Promise<boolean> {
  const r = await runTmux(["has-session", "-t", sessionTarget(session)], opts);
  return r.code === 0;
}

/** Types `text` literally into the session's active pane, then presses Enter (unless `enter: false`). */
export async function tmuxSendKeys(
  session: string,
  text: string,
  opts: TmuxOptions & { enter?: boolean } = {},
): Promise<void> {
  if (!(await tmuxSessionExists(session, opts))) {
    throw new EpError("not_found", `tmux session '${session}' does not exist`, { session });
  }
  if (text.length > 0) await tmuxOk(["send-keys", "-t", paneTarget(session), "-l", "--", text], opts, "send-keys");
  if (opts.enter !== false) await tmuxOk(["send-keys", "-t", paneTarget(session), "Enter"], opts, "send-keys");
}

export interface TmuxNewSessionOptions extends TmuxOptions {
  session: string;
  /** Absolute path of the program to run in the pane. */
  executable: string;
  args: string[];
  cwd: string;
  /** The pane's complete environment (the pane does not inherit the tmux server's). */
  env: Record<string, string>;
  /** Keep the dead pane so its exit status can be read (task runs). */
  remainOnExit?: boolean;
  /** Append everything the pane prints to this file or FIFO (raw terminal output; see pane-pipe.ts). */
  logFile?: string;
  width?: number;
  height?: number;
}

/**
 * Creates a detached session running one program. The options, the output pipe and the
 * exit-status retention are set in the same tmux command line, so a program that exits or prints
 * at once is still caught: tmux handles the whole line before it looks at the pane again.
 */
export async function tmuxNewSession(o: TmuxNewSessionOptions): Promise<void> {
  const envPath = resolveExecutable("env", process.env) ?? "/usr/bin/env";
  const env = { TERM: "xterm-256color", ...o.env };
  const args = [
    "new-session",
    "-d",
    "-s",
    o.session,
    "-x",
    String(o.width ?? 200),
    "-y",
    String(o.height ?? 50),
    "-c",
    o.cwd,
    "--",
    envPath,
    "-i",
    ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
    o.executable,
    ...o.args,
  ];
  if (o.remainOnExit) args.push(";", "set-option", "-w", "-t", paneTarget(o.session), "remain-on-exit", "on");
  if (o.logFile) args.push(";", "pipe-pane", "-t", paneTarget(o.session), "-o", `cat >> ${shellQuote(o.logFile)}`);
  const r = await runTmux(args, o);
  // A server that is shutting down (its last session just ended, or kill-server) still accepts the
  // connection and then exits under the client: tmux reports "server exited unexpectedly". The
  // retry, a moment later, starts a fresh server.
  if (r.code !== 0 && /server exited unexpectedly/.test(r.stderr)) {
    await new Promise((resolveLater) => setTimeout(resolveLater, 50));
    await tmuxOk(args, o, "new-session");
    return;
  }
  if (r.code !== 0)
    throw new EpError("internal", `tmux new-session failed: ${r.stderr.trim() || `exit code ${r.code}`}`);
}

export interface TmuxPaneState {
  pid: number;
  /** The pane's process is gone (its pty closed). */
  dead: boolean;
  /** Set once tmux has reaped the process; it can lag `dead` by a moment. */
  exitStatus: number | undefined;
  /** Signal number that killed the process, when one did. */
  exitSignal: number | undefined;
}

/** The session's active pane: its process id and, once dead (remain-on-exit), how it ended. */
/**
 * Pipes the pane's output into `path` (appending), unless the pane has a live pipe already
 * (`pipe-pane -o` would not do: it toggles, closing a live pipe).
 */
export async function tmuxPipePane(session: string, path: string, opts: TmuxOptions = {}): Promise<void> {
  const piped = (
    await tmuxOk(["display-message", "-p", "-t", paneTarget(session), "#{pane_pipe}"], opts, "display-message")
  ).trim();
  if (piped === "1") return;
  await tmuxOk(["pipe-pane", "-t", paneTarget(session), `cat >> ${shellQuote(path)}`], opts, "pipe-pane");
}

export async function tmuxPaneState(session: string, opts: TmuxOptions = {}): Promise<TmuxPaneState | undefined> {
  const r = await runTmux(
    [
      "display-message",
      "-p",
      "-t",
      paneTarget(session),
      "#{pane_pid} #{pane_dead} #{pane_dead_status} #{pane_dead_signal}",
    ],
    opts,
  );
  if (r.code !== 0) return undefined;
  const [pid, dead, status, signal] = r.stdout.replace(/\n$/, "").split(" ");
  const num = (v: string | undefined) => (v ? Number(v) : undefined);
  return { pid: Number(pid), dead: dead === "1", exitStatus: num(status), exitSignal: num(signal) };
}

/** The visible screen plus scrollback of the session's active pane, as plain text. */
export async function tmuxCapturePane(session: string, opts: TmuxOptions = {}): Promise<string> {
  return tmuxOk(["capture-pane", "-p", "-J", "-S", "-", "-E", "-", "-t", paneTarget(session)], opts, "capture-pane");
}

export async function tmuxKillSession(session: string, opts: TmuxOptions = {}): Promise<void> {
  await runTmux(["kill-session", "-t", sessionTarget(session)], opts);
}

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** Removes terminal control sequences (CSI, OSC, charset switches) and carriage returns. */
export function stripAnsi(text: string): string {
  return (
    text
      // eslint-disable-next-line no-control-regex
      .replace(/\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)/g, "")
      // eslint-disable-next-line no-control-regex
      .replace(/\x1b\[[0-?]*[ -/]*[@-~]/g, "")
      // eslint-disable-next-line no-control-regex
      .replace(/\x1b[()][A-Za-z0-9]|\x1b[=>78NOcDEHM]/g, "")
      .replace(/\r/g, "")
  );
}
