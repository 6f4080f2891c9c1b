// The daemon's own service manager: each agent is a detached child in its own process group.
// With a stateDir, a pid file (pid + kernel start time) lets a restarted daemon re-adopt a
// still-running agent instead of starting a duplicate, without mistaking a reused pid for it.
import type { ChildProcess } from "node:child_process";
import { spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Clock } from "../../common/clock.js";
import { systemClock } from "../../common/clock.js";
import { EpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import { silentLogger } from "../../common/log.js";
import type { ServiceBackend, SupervisedAgent } from "./service-backend.js";
import { resolveExecutable, validateAgent } from "./service-backend.js";

export interface ProcessBackendOptions {
  /** Where pid files go (e.g. `$EP_HOME/epd/supervise`); without it nothing is re-adoptable. */
  stateDir?: string;
  /** Where each agent's stdout+stderr is appended as `<id>.log`; default: discarded. */
  logDir?: string;
  /** SIGTERM, then SIGKILL to the group after this long (default 5 s). */
  stopTimeoutMs?: number;
  /** Leave agents running on close() so the next daemon re-adopts them (needs stateDir). Default false. */
  keepOnClose?: boolean;
  /** For the stop escalation timers (real time by default). */
  clock?: Clock;
  log?: Logger;
}

interface Entry {
  pid: number;
  startTime?: string;
  child?: ChildProcess;
  exited: boolean;
}

/** Linux /proc/<pid>/stat: state letter and start time (clock ticks since boot). */
function procStat(pid: number): { state: string; startTime: string } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { state: rest[0], startTime: rest[19] };
  } catch {
    return undefined;
  }
}

function processRunning(pid: number, startTime?: string): boolean {
  const stat = procStat(pid);
  if (stat)
    return stat.state !== "Z" && stat.state !== "X" && (startTime === undefined || stat.startTime === startTime);
  if (process.platform === "linux") return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

export function createProcessBackend(
  opts: ProcessBackendOptions = {},
): ServiceBackend & { logFile(id: string): string | undefined } {
  const clock = opts.clock ?? systemClock;
  const log = opts.log ?? silentLogger;
  const stopTimeoutMs = opts.stopTimeoutMs ?? 5_000;
  const entries = new Map<string, Entry>();
  if (opts.stateDir) mkdirSync(opts.stateDir, { recursive: true, mode: 0o700 });
  if (opts.logDir) mkdirSync(opts.logDir, { recursive: true, mode: 0o700 });
  const pidFile = (id: string) => (opts.stateDir ? join(opts.stateDir, `${id}.pid.json`) : undefined);

  function entryFor(id: string): Entry | undefined {
    const known = entries.get(id);
    if (known) return known;
    const file = pidFile(id);
    if (!file) return undefined;
    try {
      const saved = JSON.parse(readFileSync(file, "utf8")) as { pid: number; startTime?: string };
      if (!Number.isInteger(saved.pid) || saved.pid <= 1) return undefined;
      const adopted: Entry = { pid: saved.pid, startTime: saved.startTime, exited: false };
      if (!running(adopted)) {
        // The process is gone (or its pid now belongs to someone else): never touch it.
        rmSync(file, { force: true });
        return undefined;
      }
      entries.set(id, adopted);
      log.info("re-adopting agent process from pid file", { agentId: id, pid: saved.pid });
      return adopted;
    } catch {
      return undefined;
    }
  }

  function forget(id: string) {
    entries.delete(id);
    const file = pidFile(id);
    if (file) rmSync(file, { force: true });
  }

  const wait = (ms: number) => new Promise<void>((r) => clock.setTimeout(r, ms));

  async function waitGone(entry: Entry, ms: number): Promise<boolean> {
    for (let waited = 0; waited < ms; waited += 25) {
      if (!running(entry)) return true;
      await wait(25);
    }
    return !running(entry);
  }

  async function stopEntry(id: string, entry: Entry) {
    // Only signal what is verifiably ours: a child we spawned, or an adopted pid whose start time still matches.
    if (!entry.child && !running(entry)) return;
    if (running(entry)) {
      killGroup(entry.pid, "SIGTERM");
      if (!(await waitGone(entry, stopTimeoutMs))) {
        log.warn("agent did not stop on SIGTERM; killing its process group", { agentId: id, pid: entry.pid });
        killGroup(entry.pid, "SIGKILL");
        await waitGone(entry, 2_000);
      }
    }
    // Whatever the leader left behind in its group goes too.
    killGroup(entry.pid, "SIGKILL");
  }

  return {
    kind: "process",
    async start(agent: SupervisedAgent) {
      validateAgent(agent);
      if (running(entryFor(agent.id))) return;
      const entry = await spawnDetached(agent, opts.logDir ? join(opts.logDir, `${agent.id}.log`) : undefined, log);
      entries.set(agent.id, entry);
      const file = pidFile(agent.id);
      const pid = entry.pid;
      if (file) {
        writeFileSync(`${file}.tmp`, JSON.stringify({ pid, startTime: entry.startTime, command: agent.command }), {
          mode: 0o600,
        });
        renameSync(`${file}.tmp`, file);
      }
      log.info("agent process started", { agentId: agent.id, pid });
    },
    async stop(id) {
      const entry = entryFor(id);
      if (entry) await stopEntry(id, entry);
      forget(id);
    },
    async isAlive(id) {
      return running(entryFor(id));
    },
    async pid(id) {
      const entry = entryFor(id);
      return running(entry) ? entry.pid : undefined;
    },
    logFile: (id) => (opts.logDir ? join(opts.logDir, `${id}.log`) : undefined),
    async close() {
      if (opts.keepOnClose) {
        entries.clear();
        return;
      }
      await Promise.all(
        [...entries.entries()].map(async ([id, entry]) => {
          await stopEntry(id, entry);
          forget(id);
        }),
      );
    },
  };
}

/** Signals the process group (the process alone when it has none; nothing when it is gone). */
function killGroup(pid: number, signal: NodeJS.Signals) {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // gone already
    }
  }
}

function running(entry: Entry | undefined): entry is Entry {
  return !!entry && !entry.exited && processRunning(entry.pid, entry.startTime);
}

/** Starts the agent's command in its own process group, output appended to its log; exits are logged. */
async function spawnDetached(agent: SupervisedAgent, logPath: string | undefined, log: Logger): Promise<Entry> {
  const executable = resolveExecutable(agent.command[0], agent.env?.PATH ?? process.env.PATH);
  const fd = logPath ? openSync(logPath, "a", 0o600) : undefined;
  let child: ChildProcess;
  try {
    child = spawn(executable, agent.command.slice(1), {
      cwd: agent.cwd,
      env: { ...process.env, ...agent.env, EP_AGENT_ID: agent.id },
      detached: true,
      stdio: ["ignore", fd ?? "ignore", fd ?? "ignore"],
    });
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  await new Promise<void>((resolve, reject) => {
    child.once("spawn", resolve);
    child.once("error", (err) =>
      reject(new EpError("unavailable", `cannot start agent ${agent.id}: ${err.message}`, { agentId: agent.id })),
    );
  });
  child.unref();
  const pid = child.pid!;
  const entry: Entry = { pid, startTime: procStat(pid)?.startTime, child, exited: false };
  child.once("exit", (code, signal) => {
    entry.exited = true;
    log.info("agent process exited", { agentId: agent.id, pid, code, signal });
  });
  return entry;
}
