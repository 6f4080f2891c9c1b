// Where profile agents run and who keeps them running: the tmux host (panes that outlive the
// daemon), the ACP host (sessions), the service backend (systemd or plain processes), and the
// watchdog over the supervised ones. Every supervision step is a `matrix` event.
import { join } from "node:path";
import { epHome } from "../../common/paths.js";
import { chooseServiceBackend, createWatchdog, type WatchdogEvent } from "../supervise/index.js";
import type { FleetCore } from "./fleet-core.js";
import { createAcpHost, createFleetBackend, createTmuxHost } from "./hosts.js";

export interface SupervisionHooks {
  logDir: string;
  /** a frame of an ACP session's output, for the turn in progress (or the session's own) */
  progress(profileId: string, runId: string, f: { kind: string; text: string }): void;
  /** the node state the tower shows changed */
  changed(): void;
}

export async function createFleetSupervision(core: FleetCore, hooks: SupervisionHooks) {
  const { clock, log, settings, deps, redaction } = core;
  const rc = deps.runtimes.config;
  const tmux = createTmuxHost({
    socketName: settings.tmuxSocket,
    log,
    clock,
    redact: redaction && ((t) => redaction.text(t)),
  });
  const acp = createAcpHost({
    clock,
    log,
    permission: rc.vendorA_agent_acp.permission ?? "workspace",
    killGraceMs: rc.vendorA_agent_acp.killGraceSeconds * 1000,
    // a frame belongs to the turn in progress (the run id of its agent.signal.finished), or to
    // the delivery that opened the session; frames outside any turn are the session's own
    onFrame: (id, f, turnId) => hooks.progress(id, turnId ?? "acp_session", f),
  });
  const service =
    deps.serviceBackend ??
    (await chooseServiceBackend({
      prefer: settings.backend,
      systemd: { epHome: epHome(deps.env) },
      process: { stateDir: join(core.home, "supervise"), logDir: hooks.logDir, keepOnClose: true, log },
    }));
  const backend = createFleetBackend({ service, tmux, acp });
  const watchdog = createWatchdog({
    clock,
    backend,
    log: log.child({ part: "watchdog" }),
    pollMs: settings.pollMs,
    graceMs: settings.graceMs,
    throttleMs: settings.throttleMs,
    nightly: settings.nightly,
    onEvent: (e: WatchdogEvent) => {
      hooks.changed();
      core.publish(
        core.profileEvent(
          core.profiles.find((p) => p.id === e.agentId),
          {
            type: "matrix",
            name: `supervise.${e.action}`,
            status: e.action,
            payload: {
              agent: e.agentId,
              name: e.name,
              action: e.action,
              reason: e.reason,
              at: e.at,
              ...(e.error ? { error: e.error } : {}),
            },
          },
        ),
      );
    },
  });
  return { tmux, acp, service, backend, watchdog };
}

export type FleetSupervision = Awaited<ReturnType<typeof createFleetSupervision>>;
