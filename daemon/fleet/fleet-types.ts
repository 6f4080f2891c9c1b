// The fleet's contract: what it needs (FleetDeps), what it offers (Fleet), and the shapes it
// reports (profiles, reload results, the node state the tower shows).
import type { Clock } from "../../common/clock.js";
import type { Logger } from "../../common/log.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { LocalAgent } from "../../gen/ep/daemon/v1/mgmt_pb.js";
import type { LinkResponse, ReportNodeStateRequestSchema } from "../../gen/ep/tower/v1/fleet_pb.js";
import type { CronDispatcher } from "../cron/index.js";
import type { TowerClients } from "../link/tower-client.js";
import type { RuntimeRegistry } from "../runtimes/registry.js";
import type { RunRedactor } from "../secrets/broker.js";
import type { ServiceBackend, SupervisedStatus, Watchdog } from "../supervise/index.js";
import type { LocalAgentRecord } from "../worker/agent-store.js";
import type { SessionTable } from "../worker/sessions.js";
import type { AgentsFileError, FleetProfile } from "./agents-file.js";
import type { TmuxHost } from "./hosts.js";
import type { FleetSettings } from "./settings.js";

export type Delivery = "tmux_send_keys" | "acp_prompt" | "one_shot_run" | string;
export type SignalSource = "cli" | "cron" | "tower";

export interface FleetDeps {
  env: NodeJS.ProcessEnv;
  clock: Clock;
  log: Logger;
  /** The daemon home ($EP_HOME/epd). */
  home: string;
  tower: TowerClients;
  runtimes: RuntimeRegistry;
  sessions: SessionTable;
  /** The daemon's environment without credentials; base of every agent's environment. */
  baseEnv: Record<string, string>;
  /** Holds the `epd` launcher; first on every agent's PATH. */
  binDir: string;
  secretsSocket: string;
  /** The secrets broker's redaction: fetched values become [redacted:NAME] in what the fleet publishes. */
  redactor?: (sessionId: string) => RunRedactor;
  /** Agents enrolled with `ep daemon agent enroll` (not profiles): signalled through the worker's one-shot runner. */
  enrolled?: {
    find(target: string): LocalAgentRecord | undefined;
    deliver(agent: LocalAgentRecord, prompt: string): string;
  };
  /** Overrides of the env settings (tests). */
  settings?: Partial<FleetSettings>;
  /** A ready backend instead of chooseServiceBackend (tests). */
  serviceBackend?: ServiceBackend;
  /** Re-reads runtimes.toml into the runtime registry (config_reload); throws the file's EpError. */
  reloadRuntimes?: () => Promise<void>;
  /** A profile was enrolled at the tower (its tower agent id): it can claim now. */
  onEnrolled?: (agentId: string) => void;
}

/** One problem found by a config reload (NodeConfigError in proto JSON terms). */
export interface ConfigReloadError {
  file: string;
  line: number;
  field: string;
  /** the cron job or agent profile at fault */
  item: string;
  message: string;
}

/** What ReportNodeState sends. */
export type NodeState = MessageInitShape<typeof ReportNodeStateRequestSchema>;

export interface ConfigReloadResult {
  status: "ok" | "failed";
  /** one line per file: "cron.toml: 2 jobs", "agents.toml: unchanged", … */
  results: string[];
  errors: ConfigReloadError[];
}

/** What mgmt.sock shows for a profile: the contract's LocalAgent, every field set. */
export type ProfileView = Omit<LocalAgent, "$typeName" | "$unknown">;

export interface Fleet {
  readonly settings: FleetSettings;
  readonly cron: CronDispatcher;
  readonly watchdog: Watchdog;
  readonly tmux: TmuxHost;
  /** Adopts or starts profile agents, enrolls profiles that name a domain, starts cron. */
  start(): Promise<void>;
  /** Stops cron and the watchdog; tmux panes and process-backend agents keep running for the next daemon. */
  close(): Promise<void>;
  profiles(): FleetProfile[];
  /** agents.toml errors of the last load (empty when it was valid). */
  loadErrors(): AgentsFileError[];
  /** By profile id, tmux session, tower agent id or name. */
  findProfile(target: string): FleetProfile | undefined;
  /** The one signal path: delivers and records an inbox event (unless the tower already did). */
  signal(target: string, prompt: string, opts?: { source?: SignalSource; inbox?: boolean }): Promise<Delivery>;
  /** A `signal`/`supervise` link command for a profile: handled (true) or not ours (false). */
  handleLink(msg: LinkResponse): boolean;
  /** Every profile with its live state. */
  views(): Promise<ProfileView[]>;
  /** A supervised profile by id, tower agent id or session; agent_not_found otherwise. */
  supervised(target: string): FleetProfile;
  view(profile: FleetProfile, status?: SupervisedStatus): Promise<ProfileView>;
  towerAgentId(profileId: string): string | undefined;
  /**
   * Profiles enrolled at the tower as claimers for the task worker: the tower routes `assigned`
   * tasks, broadcast runs and matching `first_claim` tasks to them, so the worker claims under
   * their tower agent id (`id`), with `profile` set to the profile id.
   */
  claimers(): LocalAgentRecord[];
  /** Where a claimed task of a profile runs: the profile's cwd and env (the worker adds the per-run EP_* variables). */
  taskPlace(profileId: string): { cwd: string; env: Record<string, string>; workspace?: string } | undefined;
  /**
   * Reloads cron.toml (invalid: the running jobs are kept) and runtimes.toml (new runs use it),
   * then applies agents.toml (invalid: the running profiles are kept; valid: removed profiles
   * stop, changed ones restart, new ones start); publishes a `config.reload` matrix event with
   * every error and its line.
   */
  reloadConfig(opts?: { requestId?: string; source?: string }): Promise<ConfigReloadResult>;
  /** The state ReportNodeState sends: cron jobs, supervised agents, config errors. */
  stateSnapshot(): Promise<NodeState>;
  /** Something the tower shows changed (or the link is back): push the state soon. */
  reportState(): void;
}

export interface EnrolledState {
  agentId: string;
  domainId: string;
  runtime: string;
}
