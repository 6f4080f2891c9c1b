// What every part of the node's fleet shares: the profiles of agents.toml (replaced on reload),
// their tower enrolments and secrets sessions (fleet-state.json), and the one way fleet events
// leave the daemon — redacted, and stamped with the profile's tower agent and domain.
import { join } from "node:path";
import type { Clock } from "../../common/clock.js";
import type { Logger } from "../../common/log.js";
import type { TowerClients } from "../link/tower-client.js";
import { createJsonFileWriter, readJsonFile } from "../worker/json-file.js";
import { SESSION_ID } from "../worker/sessions.js";
import { formatAgentsFileError, readAgentsFile, type AgentsFileError, type FleetProfile } from "./agents-file.js";
import { createEventPublisher, type EventPublisher, type FleetEvent } from "./events.js";
import type { EnrolledState, FleetDeps } from "./fleet-types.js";
import type { FleetSettings } from "./settings.js";

/** The id of the fleet's redaction view at the secrets broker (session ids are `ses_…`). */
const REDACTION_VIEW = "fleet-events";

export interface FleetCore {
  readonly deps: FleetDeps;
  readonly clock: Clock;
  readonly log: Logger;
  readonly tower: TowerClients;
  readonly home: string;
  readonly settings: FleetSettings;
  readonly agentsFile: string;
  /** whether agents.toml was valid at start (profiles removed from a valid file are retired) */
  readonly loadedOk: boolean;
  /** the profiles in force; a valid reload replaces the array */
  profiles: FleetProfile[];
  /** agents.toml's errors, when it is invalid */
  errors: AgentsFileError[];
  /** profile id → its tower agent */
  readonly enrolled: Record<string, EnrolledState>;
  /** profile id → its secrets session id, kept across restarts: a re-adopted pane still has it */
  readonly profileSessions: Record<string, string>;
  /** writes fleet-state.json (rejects on failure) */
  saveState(): Promise<void>;
  /** the same, logging instead of rejecting */
  saveStateQuietly(): Promise<void>;
  readonly redaction: ReturnType<NonNullable<FleetDeps["redactor"]>> | undefined;
  readonly events: EventPublisher;
  publish(e: FleetEvent): void;
  profileEvent(p: FleetProfile | undefined, e: Omit<FleetEvent, "agentId" | "domainId">): FleetEvent;
  towerAgentId(profileId: string): string | undefined;
  /** a profile by id, tmux session, tower agent id or name */
  findProfile(target: string): FleetProfile | undefined;
}

export async function openFleetCore(deps: FleetDeps, settings: FleetSettings): Promise<FleetCore> {
  const { clock, log, home, tower } = deps;
  const agentsFile = join(home, "agents.toml");
  const loaded = readAgentsFile(agentsFile);
  if (!loaded.ok) {
    log.error(
      `${agentsFile} is invalid; no profile agents run until it is fixed (then ep node reload, or restart epd)`,
      {
        file: agentsFile,
        errors: loaded.errors.map(formatAgentsFileError),
      },
    );
  }

  const statePath = join(home, "fleet-state.json");
  const state = await readJsonFile<{
    version?: number;
    enrolled?: Record<string, EnrolledState>;
    sessions?: Record<string, string>;
  }>(statePath, {});
  const enrolled: Record<string, EnrolledState> =
    state.enrolled && typeof state.enrolled === "object" ? state.enrolled : {};
  const profileSessions: Record<string, string> = {};
  for (const [id, ses] of Object.entries(state.sessions && typeof state.sessions === "object" ? state.sessions : {})) {
    if (typeof ses === "string" && SESSION_ID.test(ses)) profileSessions[id] = ses;
  }
  const stateWriter = createJsonFileWriter(statePath, () => ({ version: 1, enrolled, sessions: profileSessions }));

  // Everything the fleet publishes (signal progress and results, inbox, cron fires, supervision)
  // is redacted like the worker's frames and results (docs/secrets.md): a value the broker handed
  // to any agent becomes [redacted:NAME] before it leaves the daemon. The view's own id is no
  // session (it can never fetch a value); it redacts against every value the broker holds.
  const redaction = deps.redactor?.(REDACTION_VIEW);
  const events = createEventPublisher({ tower, clock, log: log.child({ part: "fleet-events" }) });
  const towerAgentId = (id: string) => enrolled[id]?.agentId;

  const core: FleetCore = {
    deps,
    clock,
    log,
    tower,
    home,
    settings,
    agentsFile,
    loadedOk: loaded.ok,
    profiles: loaded.ok ? loaded.profiles : [],
    errors: loaded.ok ? [] : loaded.errors,
    enrolled,
    profileSessions,
    saveState: () => stateWriter.save(),
    saveStateQuietly: () =>
      stateWriter
        .save()
        .catch((err: Error) => log.warn("could not save the fleet state", { file: statePath, error: err.message })),
    redaction,
    events,
    publish: (e) => events.publish(redaction ? { ...e, payload: redaction.deep(e.payload) } : e),
    profileEvent: (p, e) => ({
      ...e,
      agentId: p ? (towerAgentId(p.id) ?? "") : "",
      domainId: p ? (enrolled[p.id]?.domainId ?? "") : "",
      payload: { ...(p ? { profile: p.id } : {}), ...e.payload },
    }),
    towerAgentId,
    findProfile(target) {
      const t = target.trim();
      const ps = core.profiles;
      return (
        ps.find((p) => p.id === t) ??
        ps.find((p) => p.runtime === "muxhost_hosted" && p.session === t) ??
        ps.find((p) => towerAgentId(p.id) === t) ??
        ps.find((p) => p.name === t)
      );
    },
  };
  return core;
}
