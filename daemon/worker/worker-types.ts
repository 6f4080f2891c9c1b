// The task worker's contract (TaskWorker, WorkerDeps, wake hints) and the state its claim loop
// and its runs share.
import type { Clock } from "../../common/clock.js";
import type { Logger } from "../../common/log.js";
import type { Task } from "../../gen/ep/tower/v1/resources_pb.js";
import type { TowerClients } from "../link/tower-client.js";
import type { TowerLink } from "../link/tower-link.js";
import type { RunHandle } from "../runtimes/runtime.js";
import type { McpEndpoint } from "../mcp/mcp-endpoint.js";
import type { Permission } from "../runtimes/confine.js";
import type { RuntimeRegistry } from "../runtimes/registry.js";
import type { RunRedactor } from "../secrets/broker.js";
import type { AgentStore, LocalAgentRecord } from "./agent-store.js";
import type { InflightEntry, Journal } from "./journal.js";
import type { SessionTable } from "./sessions.js";

export const OUTPUT_LIMIT = 64 * 1024;

/** A run as epd's metrics see it: the agent's runtime, how it ended, how long it ran. */
export interface EndedRun {
  runtime: string;
  /** succeeded or failed (an outcome for the tower), cancelled (by the tower) or lease_lost */
  outcome: "succeeded" | "failed" | "cancelled" | "lease_lost";
  seconds: number;
}

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
  /**
   * EP's tools for the runs, served by this epd (daemon/mcp/mcp-endpoint.ts): a grant per run, revoked when it ends.
   */
  mcp?: Pick<McpEndpoint, "grant">;
  /** What no confined run may see (EP_HOME, the node identity file): confine.ts covers them */
  hidden?: string[];
  reportBackoff?: { initialMs?: number; maxMs?: number };
  /** Told of every run that ended, for epd's metrics (daemon/metrics/): a counter and a histogram, never I/O. */
  onRunEnded?: (run: EndedRun) => void;
  /** the link, when it is a session: outcomes go up on it (report.ts) */
  uplink?: () => Pick<TowerLink, "carriesOutcomes" | "report" | "progress"> | undefined;
  /**
   * Profile agents of agents.toml enrolled at the tower (daemon/fleet): they claim like the
   * agents of agents.json, under their tower agent id, and each task runs as an ephemeral run of
   * the profile's runtime in the profile's cwd with the profile's env (docs/supervision.md).
   */
  profiles?: ProfileClaimers;
}

/** Claimers that live in the fleet rather than in agents.json. */
export interface ProfileClaimers {
  /** Enrolled profiles as claimers: `id` is the tower agent id, `profile` the agents.toml id. */
  list(): LocalAgentRecord[];
  /** Where a task of this profile runs: its cwd and its environment (without the per-run EP_* variables). */
  place(
    profileId: string,
  ): { cwd: string; env: Record<string, string>; workspace?: string; permission?: Permission } | undefined;
}

export type AgentActivity = "idle" | "claiming" | "busy";

export interface Slot {
  /** claiming: a claim of epd's own is out (the link is down); busy: a run holds the agent */
  state: AgentActivity;
  taskId?: string;
}

export interface Run {
  task: Task;
  /** its parents as the tower sent them with the assignment (TaskAssignment.parents); none: read when the run starts */
  parents?: readonly Task[];
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
}

export interface TaskWorker {
  /** Ends what a previous daemon left (orphaned runs failed retryably, pending reports resent). */
  recover(): Promise<void>;
  /**
   * A task the tower claimed and started for the agent and handed over the link, under its lease:
   * it runs now if the agent is idle (a claim of epd's own in flight gives its task back instead),
   * else it goes back (released: queued again without counting the attempt). `parents`: the
   * task's parents as the assignment carries them (the run then reads none).
   */
  take(agentId: string, task: Task, parents?: readonly Task[]): void;
  /** A link opened: outcomes waiting to be retried go now (the tower is back), while their leases hold. */
  reachable(): void;
  /** The recovery path while the link is down: each idle agent claims once. */
  pollAll(): Promise<void>;
  /**
   * Every agent as the tower should know it when a link opens: the leases it holds (runs, unacknowledged outcomes), and
   * whether it is idle.
   */
  held(): HeldAgent[];
  /** Stops a running task (the tower cancelled it); false when it is not running here. */
  cancel(taskId: string, reason: string): boolean;
  activity(agentId: string): AgentActivity;
  running(): { taskId: string; agentId: string; pid?: number }[];
  /**
   * Stops taking work; waits up to graceMs for runs, then cancels the rest (failed retryably); waits for reports up to
   * reportWaitMs.
   */
  shutdown(graceMs: number, reportWaitMs?: number): Promise<void>;
}

export interface HeldAgent {
  agentId: string;
  leaseIds: string[];
  idle: boolean;
}

/** What the claim loop and the runs share (one per worker). */
export interface WorkerState {
  slots: Map<string, Slot>;
  runs: Map<string, Run>;
  /** shutting down: no new work */
  stopping: boolean;
  /** reports have stopped */
  closed: boolean;
}
