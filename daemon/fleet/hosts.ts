// Where a profile agent's long-running process lives, behind the watchdog's ServiceBackend
// interface: a tmux pane (muxhost_hosted; the pane outlives the daemon and is re-adopted), a
// persistent ACP session (vendorA_agent_acp; a child of the daemon), or the service manager
// chosen by chooseServiceBackend (systemd user unit, else the process backend) for the rest.
import { createWriteStream, type WriteStream } from "node:fs";
import type { Clock } from "../../common/clock.js";
import { EpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import { openAcpSession, type AcpSession, type AcpTurn } from "../runtimes/acp-session.js";
import { resolveExecutable } from "../runtimes/process-group.js";
import type { ProgressFrame } from "../runtimes/runtime.js";
import type { Permission } from "../runtimes/confine.js";
import { createLineWriter, openPanePipe, type LineWriter, type PanePipe } from "../runtimes/pane-pipe.js";
import {
  tmuxKillSession,
  tmuxNewSession,
  tmuxPaneState,
  tmuxPipePane,
  tmuxSendKeys,
  tmuxSessionExists,
  type TmuxOptions,
} from "../runtimes/tmux.js";
import type { ServiceBackend, SupervisedAgent } from "../supervise/index.js";

export type HostMode = "tmux" | "acp" | "service";

/** A SupervisedAgent that also says where it lives. The watchdog hands it back to start(). */
export interface HostedAgent extends SupervisedAgent {
  mode: HostMode;
  /** tmux session name (mode tmux). */
  session?: string;
  /** The pane's output log (mode tmux): written by the daemon, redacted, from a FIFO beside it. */
  logFile?: string;
}

export interface TmuxHost {
  readonly socketName: string;
  /** Creates the pane's session unless it exists; says which happened. */
  ensure(agent: HostedAgent): Promise<"adopted" | "started">;
  isAlive(session: string): Promise<boolean>;
  pid(session: string): Promise<number | undefined>;
  stop(session: string): Promise<void>;
  send(session: string, text: string): Promise<void>;
  /**
   * Reads the pane log of an agent whose pane may already run (a supervised pane the watchdog
   * adopts without starting it): opens the FIFO and makes sure the pane pipes into it.
   */
  attachLog(agent: HostedAgent): Promise<void>;
  /** Stops reading the panes' output (the panes and their FIFOs stay for the next daemon). */
  close(): void;
}

export function createTmuxHost(opts: {
  socketName: string;
  log: Logger;
  clock: Clock;
  /** applied to every line of pane output before it is written to the pane log */
  redact?: (text: string) => string;
}): TmuxHost {
  const tmux: TmuxOptions = { socketName: opts.socketName };
  // Pane output reaches the disk only through the daemon: tmux pipes it into `<log>.fifo`, the
  // daemon appends it line by line, redacted, to the log (runtimes/pane-pipe.ts).
  const logs = new Map<string, { pipe: PanePipe; lines: LineWriter; out: WriteStream }>();
  const fifoOf = (logFile: string) => logFile.replace(/\.log$/, "") + ".fifo";
  function readLog(agent: HostedAgent): string | undefined {
    if (!agent.logFile) return undefined;
    const fifo = fifoOf(agent.logFile);
    if (logs.get(agent.id)?.pipe.path === fifo) return fifo;
    closeLog(agent.id);
    const out = createWriteStream(agent.logFile, { flags: "a", mode: 0o600 });
    out.on("error", (err) =>
      opts.log.warn("cannot write a pane log", { agent: agent.id, file: agent.logFile, error: err.message }),
    );
    const lines = createLineWriter({
      write: (t) => out.write(t),
      redact: opts.redact ?? ((t) => t),
      clock: opts.clock,
    });
    logs.set(agent.id, { pipe: openPanePipe(fifo, (t) => lines.push(t)), lines, out });
    return fifo;
  }
  function closeLog(id: string): void {
    const l = logs.get(id);
    if (!l) return;
    logs.delete(id);
    l.pipe.close();
    l.lines.close();
    l.out.end();
  }
  const alive = async (session: string) => {
    if (!(await tmuxSessionExists(session, tmux))) return false;
    const state = await tmuxPaneState(session, tmux);
    return !!state && !state.dead;
  };
  return {
    socketName: opts.socketName,
    async ensure(agent) {
      const session = agent.session ?? agent.id;
      if (await tmuxSessionExists(session, tmux)) {
        const state = await tmuxPaneState(session, tmux);
        if (state && !state.dead) {
          const fifo = readLog(agent);
          // the previous daemon's pipe may have died with it (EPIPE): a new one only when none is live
          if (fifo)
            await tmuxPipePane(session, fifo, tmux).catch((err: Error) =>
              opts.log.warn("cannot pipe the pane's output", { agent: agent.id, error: err.message }),
            );
          opts.log.info("re-adopted the tmux pane of a profile agent", {
            agent: agent.id,
            session,
            pid: state.pid,
            socket: opts.socketName,
          });
          return "adopted";
        }
        await tmuxKillSession(session, tmux); // a dead pane kept by remain-on-exit
      }
      const env = agent.env ?? {};
      const executable = resolveExecutable(agent.command[0], env, agent.cwd);
      if (!executable) {
        throw new EpError(
          "runtime_missing",
          `agent ${agent.id}: executable '${agent.command[0]}' was not found on PATH; set command in agents.toml`,
          { field: "command" },
        );
      }
      await tmuxNewSession({
        ...tmux,
        session,
        executable,
        args: agent.command.slice(1),
        cwd: agent.cwd ?? process.cwd(),
        env,
        logFile: readLog(agent),
      });
      opts.log.info("started a profile agent in a tmux pane", { agent: agent.id, session, socket: opts.socketName });
      return "started";
    },
    isAlive: alive,
    async pid(session) {
      const state = await tmuxPaneState(session, tmux);
      return state && !state.dead ? state.pid : undefined;
    },
    stop: (session) => tmuxKillSession(session, tmux),
    send: (session, text) => tmuxSendKeys(session, text, tmux),
    async attachLog(agent) {
      const fifo = readLog(agent);
      const session = agent.session ?? agent.id;
      if (fifo && (await tmuxSessionExists(session, tmux))) await tmuxPipePane(session, fifo, tmux);
    },
    close() {
      for (const id of [...logs.keys()]) closeLog(id);
    },
  };
}

export interface AcpHost {
  /** Opens the session unless it is open; its opening frames carry `turnId` (the delivery that opened it). */
  start(agent: HostedAgent, turnId?: string): Promise<void>;
  isAlive(id: string): boolean;
  pid(id: string): number | undefined;
  stop(id: string): Promise<void>;
  /**
   * Prompts the agent's session (opening it when needed); turns run one after another. Frames
   * that arrive while this turn runs are handed to onFrame with its `turnId`.
   */
  prompt(agent: HostedAgent, text: string, turnId?: string): Promise<AcpTurn>;
  close(): Promise<void>;
}

export function createAcpHost(opts: {
  clock: Clock;
  log: Logger;
  permission: Permission;
  killGraceMs: number;
  /** `turnId`: the id of the turn in progress (or of the delivery opening the session); undefined outside any. */
  onFrame(agentId: string, frame: ProgressFrame, turnId?: string): void;
}): AcpHost {
  type Entry = {
    session: Promise<AcpSession>;
    resolved?: AcpSession;
    dead: boolean;
    queue: Promise<unknown>;
    turnId?: string;
  };
  const live = new Map<string, Entry>();

  function open(agent: HostedAgent, turnId?: string) {
    const entry: Entry = {
      turnId,
      dead: false,
      queue: Promise.resolve(),
      session: Promise.resolve() as unknown as Promise<AcpSession>,
    };
    entry.session = openAcpSession({
      command: agent.command[0],
      args: agent.command.slice(1),
      cwd: agent.cwd ?? process.cwd(),
      env: agent.env ?? {},
      permission: opts.permission,
      killGraceMs: opts.killGraceMs,
      clock: opts.clock,
      logger: opts.log,
      onFrame: (f) => opts.onFrame(agent.id, f, entry.turnId),
    });
    entry.session.then(
      (s) => {
        entry.resolved = s;
        void s.exited.then((reason) => {
          entry.dead = true;
          if (reason) opts.log.warn("ACP profile agent exited", { agent: agent.id, reason });
        });
      },
      () => (entry.dead = true),
    );
    live.set(agent.id, entry);
    return entry;
  }

  const current = (id: string) => {
    const e = live.get(id);
    return e && !e.dead ? e : undefined;
  };

  return {
    async start(agent, turnId) {
      const e = current(agent.id) ?? open(agent, turnId);
      await e.session;
    },
    isAlive: (id) => !!current(id),
    pid: (id) => current(id)?.resolved?.pid,
    async stop(id) {
      const e = live.get(id);
      live.delete(id);
      if (!e) return;
      e.dead = true;
      // a session that failed to open was reported to whoever opened it
      const s = await e.session.catch(() => undefined);
      await s?.close();
    },
    prompt(agent, text, turnId) {
      const e = current(agent.id) ?? open(agent, turnId);
      // the previous turn's caller got its error; this turn runs regardless
      const turn = e.queue
        .catch(() => undefined)
        .then(async () => {
          const session = await e.session;
          e.turnId = turnId;
          try {
            return await session.prompt(text);
          } finally {
            // the turn's updates all come before its answer: later frames belong to no turn
            if (e.turnId === turnId) e.turnId = undefined;
          }
        });
      e.queue = turn.catch(() => undefined); // the turn's caller got its error; the queue only orders turns
      return turn;
    },
    async close() {
      await Promise.all([...live.keys()].map((id) => this.stop(id)));
    },
  };
}

/** The watchdog's backend: routes each agent to its host by `mode`. */
export function createFleetBackend(opts: {
  service: ServiceBackend;
  tmux: TmuxHost;
  acp: AcpHost;
}): ServiceBackend & { register(agent: HostedAgent): void } {
  const agents = new Map<string, HostedAgent>();
  const known = (id: string) => {
    const a = agents.get(id);
    if (!a) throw new EpError("agent_not_found", `no profile agent ${id} on this node`, { id });
    return a;
  };
  return {
    kind: opts.service.kind,
    register(agent) {
      agents.set(agent.id, agent);
    },
    async start(raw) {
      const agent = raw as HostedAgent;
      agents.set(agent.id, agent);
      if (agent.mode === "tmux") await opts.tmux.ensure(agent);
      else if (agent.mode === "acp") await opts.acp.start(agent);
      else await opts.service.start(agent);
    },
    async stop(id) {
      const a = known(id);
      if (a.mode === "tmux") await opts.tmux.stop(a.session ?? a.id);
      else if (a.mode === "acp") await opts.acp.stop(id);
      else await opts.service.stop(id);
    },
    async isAlive(id) {
      const a = known(id);
      if (a.mode === "tmux") return opts.tmux.isAlive(a.session ?? a.id);
      if (a.mode === "acp") return opts.acp.isAlive(id);
      return opts.service.isAlive(id);
    },
    async pid(id) {
      const a = known(id);
      if (a.mode === "tmux") return opts.tmux.pid(a.session ?? a.id);
      if (a.mode === "acp") return opts.acp.pid(id);
      return opts.service.pid(id);
    },
    async close() {
      await opts.service.close();
    },
  };
}
