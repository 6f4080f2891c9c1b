// What a profile agent's process gets: its working directory, its environment (the runtime's
// settings, EP_* variables, PATH with epd's bin), its secrets session (kept across daemon
// restarts in the fleet state), and the spec the hosts (tmux, ACP, service) start it from.
import { join } from "node:path";
import { EpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import type { TowerClients } from "../link/tower-client.js";
import type { FleetProfile } from "./agents-file.js";
import type { EnrolledState, FleetDeps } from "./fleet-types.js";
import type { HostedAgent } from "./hosts.js";

export interface ProfileEnvDeps {
  deps: FleetDeps;
  home: string;
  logDir: string;
  rc: FleetDeps["runtimes"]["config"];
  tower: TowerClients;
  log: Logger;
  enrolled: Record<string, EnrolledState>;
  /** profile id → secrets session id, saved with the fleet state */
  profileSessions: Record<string, string>;
  saveState(): Promise<unknown>;
  towerAgentId(profileId: string): string | undefined;
}

export function createProfileEnv(x: ProfileEnvDeps) {
  const { deps, home, logDir, rc, tower, log, enrolled, profileSessions, saveState, towerAgentId } = x;
  const secretsSessions = new Map<string, string>();
  const cwdOf = (p: FleetProfile) => p.cwd ?? join(home, "agents", p.id);

  function agentEnv(p: FleetProfile, full: boolean): Record<string, string> {
    let session = secretsSessions.get(p.id);
    if (!session) {
      const info = {
        taskId: `profile:${p.id}`,
        agentId: towerAgentId(p.id) ?? p.id,
        domainId: enrolled[p.id]?.domainId ?? "",
      };
      const saved = profileSessions[p.id];
      let opened: string | undefined;
      if (saved) {
        try {
          opened = deps.sessions.open(info, { id: saved }).id;
        } catch (err) {
          log.warn("could not re-open a profile's secrets session; it gets a new one", {
            profile: p.id,
            error: (err as Error).message,
          });
        }
      }
      session = opened ?? deps.sessions.open(info).id;
      secretsSessions.set(p.id, session);
      if (profileSessions[p.id] !== session) {
        profileSessions[p.id] = session;
        void saveState();
      }
    }
    return { ...profileEnv(p, full), EP_SECRETS_SESSION: session };
  }

  /** A profile's environment without a secrets session (task runs open their own). */
  function profileEnv(p: FleetProfile, full: boolean): Record<string, string> {
    const runtimeEnv =
      (deps.runtimes.config as unknown as Record<string, { env?: Record<string, string> }>)[p.runtime]?.env ?? {};
    const base = full ? { ...deps.baseEnv, ...runtimeEnv } : {};
    return {
      ...base,
      ...p.env,
      PATH: [deps.binDir, p.env.PATH ?? deps.baseEnv.PATH ?? "/usr/local/bin:/usr/bin:/bin"].join(":"),
      EP_AGENT_ID: towerAgentId(p.id) ?? p.id,
      EP_PROFILE: p.id,
      EP_BASE_URL: tower.baseUrl,
      EP_SECRETS_SOCKET: deps.secretsSocket,
      ...(enrolled[p.id] ? { EP_DOMAIN_ID: enrolled[p.id].domainId } : {}),
    };
  }

  function hosted(p: FleetProfile): HostedAgent {
    if (p.runtime === "muxhost_hosted") {
      return {
        id: p.id,
        name: p.name,
        mode: "tmux",
        session: p.session,
        command: p.command ?? [rc.muxhost_hosted.command, ...rc.muxhost_hosted.args],
        cwd: cwdOf(p),
        env: agentEnv(p, true),
        logFile: join(logDir, `${p.id}.pane.log`),
      };
    }
    if (p.runtime === "vendorA_agent_acp") {
      return {
        id: p.id,
        name: p.name,
        mode: "acp",
        command: p.command ?? [rc.vendorA_agent_acp.command, ...rc.vendorA_agent_acp.args],
        cwd: cwdOf(p),
        env: agentEnv(p, true),
      };
    }
    if (!p.command)
      throw new EpError("invalid_argument", `profile ${p.id} (${p.runtime}) has no command to keep running`, {
        field: "command",
      });
    return { id: p.id, name: p.name, mode: "service", command: p.command, cwd: cwdOf(p), env: agentEnv(p, false) };
  }

  return {
    cwdOf,
    agentEnv,
    profileEnv,
    hosted,
    /** Ends every open secrets session (daemon shutdown; the ids stay saved for the next start). */
    closeSessions(): void {
      for (const id of secretsSessions.values()) deps.sessions.end(id);
    },
    /** Ends the profile's secrets session (its agent stopped for good). */
    async endSession(profileId: string): Promise<void> {
      const session = secretsSessions.get(profileId);
      if (session) {
        deps.sessions.end(session);
        secretsSessions.delete(profileId);
      }
      if (profileSessions[profileId]) {
        delete profileSessions[profileId];
        await saveState();
      }
    },
  };
}
