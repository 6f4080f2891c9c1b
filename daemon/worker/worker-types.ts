// The task worker's contract (TaskWorker, WorkerDeps, wake hints) and the state its claim loop
// and its runs share.
import type { Clock } from "../../common/clock.js";
import type { Logger } from "../../common/log.js";
import type { Task } from "../../gen/ep/tower/v1/resources_pb.js";
import type { TowerClients } from "../link/tower-client.js";
import type { RunHandle } from "../runtimes/runtime.js";
import type { McpEndpoint } from "../mcp/mcp-endpoint.js";
import type { Permission } from "../runtimes/confine.js";
import type { RuntimeRegistry } from "../runtimes/registry.js";
import type { RunRedactor } from "../secrets/broker.js";
import type { AgentStore, LocalAgentRecord } from "./agent-store.js";
import type { InflightEntry, Journal } from "./journal.js";
import type { SessionTable } from "./sessions.js";

export const OUTPUT_LIMIT = 64 * 1024;

export interface WorkerDeps {
  tower: TowerClients;
  agents: AgentStore;
  runtimes: RuntimeRegistry;
  journal: Journal;
  sessions: SessionTable;
  clock: Clock;
  log: Logger;
  /** $EP_HOME/epd */
  home: string;
  secretsSocket: string;
  /** put first on every run's PATH (holds an `epd` launcher) */
  binDir: string;
  /** the environment runs start from (the daemon's own, minus its credentials) */
  baseEnv: Record<string, string>;
  /** the secrets broker's redaction: fetched values become [redacted:NAME] in frames and results */
  redactor?: (sessionId: string) => RunRedactor;
  progressWindowMs?: number;
  /** EP's tools for the runs, served by this epd (daemon/mcp/mcp-endpoint.ts): a grant per run, revoked when it ends. */
  mcp?: Pick<McpEndpoint, "grant">;
  /** What no confined run may see (EP_HOME, the node identity file): confine.ts covers them */
  hidden?: string[];
  reportBackoff?: { initialMs?: number; maxMs?: number };
  /**
   * Profile agents of agents.toml enrolled at the tower (daemon/fleet): they claim like the
   * agents of agents.json, under their tower agent id, and each task runs as an ephemeral run of
   * the profile's runtime in the profile's cwd with the profile's env (docs/supervision.md).
   */
  profiles?: ProfileClaimers;
  /**
   * Every claim resumes (ClaimTask resume), not only those at start, after a hello or after a lost
   * answer: with pushed work the tower may have just claimed a task for the agent a claim is for
   * (the push on its way), which the claim then answers instead of a second task the daemon would
   * have to give one of back.
   */
  resumeEveryClaim?: boolean;
}

/** Claimers that live in the fleet rather than in agents.json. */
export interface ProfileClaimers {
  /** Enrolled profiles as claimers: `id` is the tower agent id, `profile` the agents.toml id. */
  list(): LocalAgentRecord[];
  /** Where a task of this profile runs: its cwd and its environment (without the per-run EP_* variables). */
  place(profileId: string): { cwd: string; env: Record<string, string>; workspace?: string; permission?: Permission } | undefined;
}

export type AgentActivity = "idle" | "claiming" | "busy";

export interface WakeHint {
  agentId?: string;
  domainId?: string;
  taskId?: string;
  /** what the ready task needs ("" = any runtime); undefined when the tower did not say */
  runtime?: string;
  capabilities?: string[];
}

export interface Slot {
  state: AgentActivity;
  /** a wake-up arrived while claiming: claim once more before going idle */
  again: boolean;
  /**
   * the next claim asks for what the agent already holds first (ClaimTask resume): set by the polls
   * at start and after each hello, and by a failed claim, whose answer may have been lost
   */
  resume?: boolean;
  taskId?: string;
  /**
   * a task the tower pushed while this slot was claiming, or reporting its run's outcome: it runs
   * once the claim comes back empty or the outcome is acknowledged without a next task, else it is given back
   */
  pushed?: Task;
}

export interface Run {
  task: Task;
  agent: LocalAgentRecord;
  handle?: RunHandle;
  entry: InflightEntry;
  /** why the run is being stopped by us, if it is */
  stop?: "tower_cancel" | "lease_lost" | "shutdown";
  /** settles when the subprocess is over, before its outcome is reported */
  ended: Promise<void>;
  markEnded(): void;
  /** settles when the run is over and its outcome delivered (or left in the journal at shutdown) */
  done: Promise<void>;
  /** the agent's next task, claimed and started with this run's outcome (claim_next) */
  next?: Task;
  /** the run is over and its outcome on its way to the tower */
  reporting?: boolean;
}

export interface TaskWorker {
  /** Ends what a previous daemon left (orphaned runs failed retryably, pending reports resent). */
  recover(): Promise<void>;
  /**
   * A task may be ready: for one agent, or for a domain. With the task's runtime and
   * capabilities (the tower sends them) one idle agent that can take it claims; without them
   * idle agents of the domain claim one after the other until one gets work.
   */
  wake(hint?: WakeHint): void;
  /**
   * A task the tower claimed and started for the agent and pushed over the link: it runs now if
   * the agent is idle, after a claim in flight comes back empty, else it is given back (released:
   * queued again without counting the attempt).
   */
  take(agentId: string, task: Task): void;
  /**
   * Claims for every idle agent (startup, reconnect, periodic poll); a busy one claims once its run
   * ends. With `resume` (at start and after each hello) the tower answers first with a task the
   * agent holds that this daemon never heard of (a claim's answer or a pushed task lost with a link).
   */
  pollAll(resume?: boolean): void;
  /** Stops a running task (the tower cancelled it); false when it is not running here. */
  cancel(taskId: string, reason: string): boolean;
  activity(agentId: string): AgentActivity;
  running(): { taskId: string; agentId: string; pid?: number }[];
  /** Tells the tower each local agent's state again (after the link came back). */
  announceAgents(): void;
  /** Stops claiming; waits up to graceMs for runs, then cancels the rest (failed retryably); waits for reports up to reportWaitMs. */
  shutdown(graceMs: number, reportWaitMs?: number): Promise<void>;
}

/** What the claim loop and the runs share (one per worker). */
export interface WorkerState {
  slots: Map<string, Slot>;
  runs: Map<string, Run>;
  /** agents with an outcome from a previous daemon still undelivered: they claim only once it is */
  blocked: Map<string, number>;
  /**
   * Domains where a wake-up found no idle agent to claim with: work may be queued there, so an
   * agent of the domain that finishes a run claims again. A claim that comes back empty clears it.
   */
  backlog: Set<string>;
  /**
   * The claim of each task lately started here (task id → its attempt and claim time, the oldest
   * dropped past RAN_KEPT): a second delivery of a claim already run — its push arriving after a
   * resumed claim took it up and the run ended — is not a second run (ranHere in pushed-tasks.ts).
   */
  ran: Map<string, string>;
  /** shutting down: no new claims */
  stopping: boolean;
  /** reports have stopped */
  closed: boolean;
}
