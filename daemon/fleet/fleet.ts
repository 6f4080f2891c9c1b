// The node's fleet: profile agents from agents.toml (tmux panes that outlive the daemon, ACP
// sessions, one-shot runs), the one signal path (`ep agent signal`, cron `signal` jobs, the
// tower's `signal` link command), the watchdog over supervised agents, and the cron dispatcher.
// Every signal is an `inbox` event, every cron fire and supervision step a `matrix` event.
// This file wires the parts; each lives in its own module (docs/architecture.md).
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { createStateReporter } from "./state-report.js";
import { fleetSettings, type FleetSettings } from "./settings.js";
import { openFleetCore } from "./fleet-core.js";
import { createEnrollment } from "./fleet-enroll.js";
import { createFleetSupervision } from "./fleet-supervision.js";
import { createFleetCron } from "./fleet-cron.js";
import { createProfileEnv } from "./fleet-env.js";
import { createSignalDelivery } from "./fleet-signals.js";
import { createProfileLifecycle } from "./fleet-profiles.js";
import { createConfigReload } from "./fleet-reload.js";
import { createFleetCommands } from "./fleet-commands.js";
import { cronJobState, profileView, supervisedState } from "./fleet-state.js";
import type { FleetProfile } from "./agents-file.js";
import type { SupervisedStatus } from "../supervise/index.js";
import type { ConfigReloadError, Fleet, FleetDeps, NodeState } from "./fleet-types.js";

export type * from "./fleet-types.js";

export async function createFleet(deps: FleetDeps): Promise<Fleet> {
  const { clock, log, home, tower } = deps;
  const settings: FleetSettings = {
    ...fleetSettings(deps.env, deps.runtimes.config.muxhost_hosted.socketName),
    ...deps.settings,
  };
  const logDir = join(home, "logs");
  await mkdir(logDir, { recursive: true, mode: 0o700 });

  const core = await openFleetCore(deps, settings);
  const { publish, profileEvent, towerAgentId, enrolled } = core;
  const changed = () => reporter.changed();
  const progress = (p: FleetProfile | undefined, runId: string, f: { kind: string; text: string }) =>
    publish(
      profileEvent(p, {
        type: "progress",
        name: "agent.signal.progress",
        payload: { run_id: runId, kind: f.kind, text: f.text.slice(0, 8192) },
      }),
    );

  const hosts = await createFleetSupervision(core, {
    logDir,
    changed,
    progress: (id, runId, f) =>
      progress(
        core.profiles.find((p) => p.id === id),
        runId,
        f,
      ),
  });
  const { tmux, acp, service, backend, watchdog } = hosts;
  const cron = createFleetCron(core, {
    changed,
    signal: (session, prompt) => commands.signal(session, prompt, { source: "cron" }),
  });

  // the state the tower shows (list_cron_jobs, get_supervision)
  const agentsErrors = (): ConfigReloadError[] =>
    core.errors.map((e) => ({
      file: core.agentsFile,
      line: e.line,
      field: e.field ?? "",
      item: e.agent ?? "",
      message: e.message,
    }));
  async function stateSnapshot(): Promise<NodeState> {
    const supervised = watchdog.list().map((st) => {
      const p = core.profiles.find((x) => x.id === st.id);
      return supervisedState(st, p, towerAgentId(st.id) ?? "", enrolled[st.id]?.domainId ?? p?.domain ?? "");
    });
    return {
      cronJobs: cron.cron.list().map(cronJobState),
      supervised,
      configErrors: [...cron.errors(), ...agentsErrors()],
    };
  }
  const reporter = createStateReporter({
    clock,
    log: log.child({ part: "state-report" }),
    intervalMs: settings.stateReportMs,
    snapshot: stateSnapshot,
    send: (req) => tower.nodes.reportNodeState(req),
  });

  const env = createProfileEnv({
    deps,
    home,
    logDir,
    rc: deps.runtimes.config,
    tower,
    log,
    enrolled,
    profileSessions: core.profileSessions,
    saveState: core.saveStateQuietly,
    towerAgentId,
  });
  const signals = createSignalDelivery({
    clock,
    runtimes: deps.runtimes,
    tmux,
    acp,
    watchdog,
    hosted: env.hosted,
    cwdOf: env.cwdOf,
    agentEnv: env.agentEnv,
    towerAgentId,
    progress,
    publish,
    profileEvent,
  });
  const enrollment = createEnrollment(core);
  const lifecycle = createProfileLifecycle(core, { hosts, env, enrollment, changed });
  const reloadConfig = createConfigReload({
    home,
    log,
    cron: cron.cron,
    cronFile: cron.file,
    agentsFile: core.agentsFile,
    reloadRuntimes: deps.reloadRuntimes,
    setAgentsErrors: (e) => (core.errors = e),
    agentsErrors,
    applyProfiles: lifecycle.applyProfiles,
    publish,
    changed,
  });
  const commands = createFleetCommands(core, { deliver: signals.deliver, watchdog, reloadConfig });
  const view = (p: FleetProfile, status?: SupervisedStatus) =>
    profileView(p, status, { tmux, acp, tmuxSocket: settings.tmuxSocket, towerAgentId, enrolled });

  return {
    settings,
    cron: cron.cron,
    watchdog,
    tmux,
    async start() {
      reporter.start();
      await lifecycle.startAll();
      await cron.cron.start();
      changed();
      const profiles = core.profiles;
      log.info("fleet started", {
        profiles: profiles.length,
        supervised: profiles.filter((p) => p.supervise).length,
        cron_jobs: cron.cron.list().length,
        tmux_socket: settings.tmuxSocket,
        backend: service.kind,
      });
    },
    async close() {
      enrollment.close();
      reporter.close();
      await cron.cron.close();
      await watchdog.close();
      await signals.cancelRuns("the daemon is shutting down");
      await acp.close();
      await backend.close();
      tmux.close(); // flushes the pane logs (redacted) before the values are released below
      env.closeSessions();
      await core.events.close();
      core.redaction?.release();
      cron.store.close();
    },
    profiles: () => [...core.profiles],
    loadErrors: () => core.errors,
    findProfile: core.findProfile,
    signal: commands.signal,
    handleLink: commands.handleLink,
    async views() {
      const statuses = new Map(watchdog.list().map((s) => [s.id, s]));
      return Promise.all(core.profiles.map((p) => view(p, statuses.get(p.id))));
    },
    supervised: commands.supervised,
    view,
    towerAgentId,
    claimers: enrollment.claimers,
    taskPlace(profileId) {
      const p = core.profiles.find((x) => x.id === profileId);
      return p
        ? {
            cwd: env.cwdOf(p),
            env: env.profileEnv(p, true),
            ...(p.workspace ? { workspace: p.workspace } : {}),
            ...(p.permission ? { permission: p.permission } : {}),
          }
        : undefined;
    },
    reloadConfig,
    stateSnapshot,
    reportState: changed,
  };
}
