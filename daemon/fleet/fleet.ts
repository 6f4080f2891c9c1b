// The node's fleet: profile agents from agents.toml (tmux panes that outlive the daemon, ACP
// sessions, one-shot runs), the one signal path (`ep agent signal`, cron `signal` jobs, the
// tower's `signal` link command), the watchdog over supervised agents, and the cron dispatcher.
// Every signal is an `inbox` event, every cron fire and supervision step a `matrix` event.
import type { JsonObject } from "@bufbuild/protobuf";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { ClockTimer } from "../../common/clock.js";
import { EpError, invalidField, toEpError } from "../../common/errors.js";
import { epHome } from "../../common/paths.js";
import { createCronDispatcher, createFileCronStore, createJobDispatch, type CronFire, type CronStore } from "../cron/index.js";
import { chooseServiceBackend, createWatchdog, type SupervisedStatus, type WatchdogEvent } from "../supervise/index.js";
import type { LocalAgentRecord } from "../worker/agent-store.js";
import { createJsonFileWriter, readJsonFile } from "../worker/json-file.js";
import { SESSION_ID } from "../worker/sessions.js";
import { formatAgentsFileError, readAgentsFile, type AgentsFileError, type FleetProfile } from "./agents-file.js";
import { createEventPublisher, type EventPublisher, type FleetEvent } from "./events.js";
import { createAcpHost, createFleetBackend, createTmuxHost, type AcpHost } from "./hosts.js";
import { fleetSettings, type FleetSettings } from "./settings.js";
import { createStateReporter } from "./state-report.js";
import { createConfigReload } from "./fleet-reload.js";
import { cronJobState, profileView, supervisedState } from "./fleet-state.js";
import { createSignalDelivery } from "./fleet-signals.js";
import { createProfileEnv } from "./fleet-env.js";
import type { ConfigReloadError, EnrolledState, Fleet, FleetDeps, NodeState } from "./fleet-types.js";

export type * from "./fleet-types.js";

const MAX_PROMPT = 100_000;
/** The id of the fleet's redaction view at the secrets broker (session ids are `ses_…`). */
const REDACTION_VIEW = "fleet-events";

export async function createFleet(deps: FleetDeps): Promise<Fleet> {
  const { clock, log, home, tower } = deps;
  const rc = deps.runtimes.config;
  const settings: FleetSettings = { ...fleetSettings(deps.env, rc.muxhost_hosted.socketName), ...deps.settings };
  const agentsFile = join(home, "agents.toml");
  const logDir = join(home, "logs");
  await mkdir(logDir, { recursive: true, mode: 0o700 });

  // ---- profiles
  let profiles: FleetProfile[] = [];
  let errors: AgentsFileError[] = [];
  const loaded = readAgentsFile(agentsFile);
  if (loaded.ok) profiles = loaded.profiles;
  else {
    errors = loaded.errors;
    log.error(`${agentsFile} is invalid; no profile agents run until it is fixed (then ep node reload, or restart epd)`, {
      file: agentsFile,
      errors: errors.map(formatAgentsFileError),
    });
  }

  // ---- tower enrollment of profiles that name a domain
  const statePath = join(home, "fleet-state.json");
  const state = await readJsonFile<{ version?: number; enrolled?: Record<string, EnrolledState>; sessions?: Record<string, string> }>(statePath, {});
  const enrolled: Record<string, EnrolledState> = state.enrolled && typeof state.enrolled === "object" ? state.enrolled : {};
  // Each profile's secrets session id, kept across daemon restarts: a pane or process the next
  // daemon re-adopts still has it in its environment (the file is 0600 in the 0700 home).
  const profileSessions: Record<string, string> = {};
  for (const [id, ses] of Object.entries(state.sessions && typeof state.sessions === "object" ? state.sessions : {})) {
    if (typeof ses === "string" && SESSION_ID.test(ses)) profileSessions[id] = ses;
  }
  const stateWriter = createJsonFileWriter(statePath, () => ({ version: 1, enrolled, sessions: profileSessions }));
  const saveState = () => stateWriter.save().catch((err: Error) => log.warn("could not save the fleet state", { file: statePath, error: err.message }));
  const towerAgentId = (id: string) => enrolled[id]?.agentId;

  // ---- events
  // Everything the fleet publishes (signal progress and results, inbox, cron fires, supervision)
  // is redacted like the worker's frames and results (docs/secrets.md): a value the broker handed
  // to any agent becomes [redacted:NAME] before it leaves the daemon. The view's own id is no
  // session (it can never fetch a value); it redacts against every value the broker holds.
  const redaction = deps.redactor?.(REDACTION_VIEW);
  const events: EventPublisher = createEventPublisher({ tower, clock, log: log.child({ part: "fleet-events" }) });
  const publish = (e: FleetEvent) => events.publish(redaction ? { ...e, payload: redaction.deep(e.payload) } : e);
  const profileEvent = (p: FleetProfile | undefined, e: Omit<FleetEvent, "agentId" | "domainId">): FleetEvent => ({
    ...e,
    agentId: p ? towerAgentId(p.id) ?? "" : "",
    domainId: p ? enrolled[p.id]?.domainId ?? "" : "",
    payload: { ...(p ? { profile: p.id } : {}), ...e.payload },
  });

  // ---- hosts and the watchdog
  const tmux = createTmuxHost({ socketName: settings.tmuxSocket, log, clock, redact: redaction && ((t) => redaction.text(t)) });
  const acp: AcpHost = createAcpHost({
    clock,
    log,
    permission: rc.vendorA_agent_acp.permission,
    killGraceMs: rc.vendorA_agent_acp.killGraceSeconds * 1000,
    // a frame belongs to the turn in progress (the run id of its agent.signal.finished), or to
    // the delivery that opened the session; frames outside any turn are the session's own
    onFrame: (id, f, turnId) => progress(profiles.find((p) => p.id === id), turnId ?? "acp_session", f),
  });
  const service =
    deps.serviceBackend ??
    (await chooseServiceBackend({
      prefer: settings.backend,
      systemd: { epHome: epHome(deps.env) },
      process: { stateDir: join(home, "supervise"), logDir, keepOnClose: true, log },
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
      reporter.changed();
      publish(
        profileEvent(profiles.find((p) => p.id === e.agentId), {
          type: "matrix",
          name: `supervise.${e.action}`,
          status: e.action,
          payload: { agent: e.agentId, name: e.name, action: e.action, reason: e.reason, at: e.at, ...(e.error ? { error: e.error } : {}) },
        }),
      );
    },
  });

  // ---- cron
  const fileCronStore: CronStore = createFileCronStore(join(home, "cron-state.json"), { log });
  // the fire history (a bash job's output, a signal's outcome) is on disk: redacted first
  const cronStore: CronStore = redaction ? { ...fileCronStore, record: (fire) => fileCronStore.record(redaction.deep(fire)) } : fileCronStore;
  const cron = createCronDispatcher({
    clock,
    log: log.child({ part: "cron" }),
    store: cronStore,
    file: join(home, "cron.toml"),
    tickMs: settings.cronTickMs,
    dispatch: createJobDispatch({
      signal: async (job) => {
        const via = await fleet.signal(job.session, job.prompt, { source: "cron" });
        return { status: "ok", output: `delivered to ${job.session} via ${via}` };
      },
      bash: { env: { ...deps.baseEnv }, cwd: home, timeoutMs: 10 * 60_000 },
    }),
    onFire: (fire: CronFire) => {
      reporter.changed();
      publish({
        type: "matrix",
        name: "cron.fired",
        status: fire.status,
        payload: {
          job: fire.job,
          slot: fire.slot,
          fired_at: fire.firedAt,
          status: fire.status,
          ...(fire.exitCode !== undefined ? { exit_code: fire.exitCode } : {}),
          ...(fire.error ? { error: fire.error } : {}),
          ...(fire.output ? { output: fire.output.slice(-2048) } : {}),
        },
      });
    },
  });

  // ---- the state the tower shows (list_cron_jobs, get_supervision)
  const cronFile = join(home, "cron.toml");
  const cronErrors = (): ConfigReloadError[] =>
    cron.loadErrors().map((e) => ({ file: cronFile, line: e.line, field: e.field ?? "", item: e.job ?? "", message: e.message }));
  const agentsErrors = (): ConfigReloadError[] =>
    errors.map((e) => ({ file: agentsFile, line: e.line, field: e.field ?? "", item: e.agent ?? "", message: e.message }));
  async function stateSnapshot(): Promise<NodeState> {
    const cronJobs = cron.list().map(cronJobState);
    const supervisedAgents = watchdog.list().map((st) => {
      const p = profiles.find((x) => x.id === st.id);
      return supervisedState(st, p, towerAgentId(st.id) ?? "", enrolled[st.id]?.domainId ?? p?.domain ?? "");
    });
    return { cronJobs, supervised: supervisedAgents, configErrors: [...cronErrors(), ...agentsErrors()] };
  }
  const reporter = createStateReporter({
    clock,
    log: log.child({ part: "state-report" }),
    intervalMs: settings.stateReportMs,
    snapshot: stateSnapshot,
    send: (req) => tower.nodes.reportNodeState(req),
  });

  // ---- agent processes: cwd, environment, secrets session, what the hosts run (fleet-env.ts)
  const env = createProfileEnv({ deps, home, logDir, rc, tower, log, enrolled, profileSessions, saveState, towerAgentId });
  const { cwdOf, agentEnv, profileEnv, hosted } = env;

  /** An enrolled profile whose enrolment still fits agents.toml (same domain and runtime). */
  const enrolledNow = (p: FleetProfile): EnrolledState | undefined => {
    const e = enrolled[p.id];
    return e && p.domain && e.domainId === p.domain && e.runtime === p.runtime ? e : undefined;
  };
  function claimers(): LocalAgentRecord[] {
    const out: LocalAgentRecord[] = [];
    for (const p of profiles) {
      const e = enrolledNow(p);
      if (e) out.push({ id: e.agentId, domainId: e.domainId, name: p.name, runtime: p.runtime, capabilities: [...p.capabilities], enrolledAt: "", profile: p.id });
    }
    return out;
  }


  // ---- progress of signal runs
  function progress(p: FleetProfile | undefined, runId: string, f: { kind: string; text: string }) {
    publish(profileEvent(p, { type: "progress", name: "agent.signal.progress", payload: { run_id: runId, kind: f.kind, text: f.text.slice(0, 8192) } }));
  }

  // ---- delivering a signal to a profile (fleet-signals.ts)
  const signals = createSignalDelivery({ clock, runtimes: deps.runtimes, tmux, acp, watchdog, hosted, cwdOf, agentEnv, towerAgentId, progress, publish, profileEvent });
  const deliver = signals.deliver;

  function findProfile(target: string): FleetProfile | undefined {
    const t = target.trim();
    return (
      profiles.find((p) => p.id === t) ??
      profiles.find((p) => p.runtime === "muxhost_hosted" && p.session === t) ??
      profiles.find((p) => towerAgentId(p.id) === t) ??
      profiles.find((p) => p.name === t)
    );
  }

  function supervised(target: string): FleetProfile {
    const p = findProfile(target);
    if (!p) throw new EpError("agent_not_found", `No supervised agent "${target}"; list them with 'ep agent supervise list'.`, { id: target });
    if (!p.supervise) throw new EpError("agent_not_found", `Agent "${p.id}" is not supervised; set supervise = true in agents.toml.`, { id: target });
    return p;
  }

  const view = (p: FleetProfile, status?: SupervisedStatus) => profileView(p, status, { tmux, acp, tmuxSocket: settings.tmuxSocket, towerAgentId, enrolled });

  // ---- enrollment (retried until the tower answers)
  let enrollTimer: ClockTimer | undefined;
  let closed = false;
  const reported = new Set<string>();
  async function enrollProfiles(): Promise<void> {
    let failed = false;
    for (const p of profiles) {
      if (!p.domain) continue;
      const have = enrolled[p.id];
      if (have && have.domainId === p.domain && have.runtime === p.runtime) {
        // agents enrolled before the tower knew: tell it (once per start) whether this one is supervised
        if (!reported.has(have.agentId)) {
          await tower.agents
            .updateAgentState({ agentId: have.agentId, state: "", reason: "epd", supervised: p.supervise })
            .then(() => reported.add(have.agentId))
            .catch((err: unknown) => log.debug("could not report supervision to the tower; next start tries again", { profile: p.id, error: toEpError(err).message }));
        }
        continue;
      }
      try {
        const res = await tower.agents.enrollAgent({ domainId: p.domain, runtime: p.runtime, capabilities: p.capabilities, name: p.name, supervised: p.supervise });
        reported.add(res.agent?.id ?? "");
        if (!res.agent) throw new Error("the tower answered without the agent");
        enrolled[p.id] = { agentId: res.agent.id, domainId: res.agent.domainId, runtime: p.runtime };
        await stateWriter.save();
        log.info("profile enrolled at the tower", { profile: p.id, agent_id: res.agent.id, domain_id: p.domain });
        deps.onEnrolled?.(res.agent.id);
        if (have) await retire(have.agentId, `replaced by ${res.agent.id}: profile ${p.id} now runs ${p.runtime} in domain ${p.domain}`);
      } catch (err) {
        const e = toEpError(err);
        failed = true;
        log.warn("profile not enrolled at the tower yet; retrying in 30 s", { profile: p.id, domain_id: p.domain, error: e.message, code: e.code });
      }
    }
    if (failed && !closed) {
      enrollTimer = clock.setTimeout(() => {
        enrollTimer = undefined;
        void enrollProfiles();
      }, 30_000);
    }
  }

  // ---- starting and stopping profile agents (daemon start, config reload)
  async function startProfile(p: FleetProfile): Promise<void> {
    try {
      await mkdir(cwdOf(p), { recursive: true, mode: 0o700 });
      if (p.supervise) {
        const agent = hosted(p);
        backend.register(agent);
        // a pane the watchdog finds running is adopted without a start: read its log from here
        if (agent.mode === "tmux") await tmux.attachLog(agent);
        await watchdog.add(agent);
      } else if (p.runtime === "muxhost_hosted") {
        const how = await tmux.ensure(hosted(p));
        publish(profileEvent(p, { type: "matrix", name: `agent.${how}`, status: "running", payload: { session: p.session, socket: settings.tmuxSocket } }));
      }
    } catch (err) {
      log.error("profile agent did not start", { profile: p.id, error: (err as Error).message });
      publish(profileEvent(p, { type: "matrix", name: "agent.start_failed", status: "error", payload: { error: (err as Error).message } }));
    }
  }

  /** Stops what runs for a profile (its supervised process, tmux pane or ACP session) and ends its secrets session. */
  async function stopProfile(p: FleetProfile, reason: string): Promise<void> {
    try {
      if (p.supervise) {
        watchdog.remove(p.id);
        await backend.stop(p.id);
      } else if (p.runtime === "muxhost_hosted") {
        await tmux.stop(p.session);
      } else if (p.runtime === "vendorA_agent_acp" && acp.isAlive(p.id)) {
        await acp.stop(p.id);
      }
    } catch (err) {
      log.warn("profile agent did not stop cleanly", { profile: p.id, error: (err as Error).message });
    }
    await env.endSession(p.id);
    publish(profileEvent(p, { type: "matrix", name: "agent.stopped", status: "stopped", payload: { reason } }));
  }

  /**
   * Applies a valid agents.toml: removed profiles stop, changed ones restart with their new
   * definition, new ones are enrolled and start; unchanged ones are left alone.
   */
  async function applyProfiles(next: FleetProfile[]): Promise<string> {
    const before = new Map(profiles.map((p) => [p.id, p]));
    const ids = new Set(next.map((p) => p.id));
    const removed = profiles.filter((p) => !ids.has(p.id));
    const changed = next.filter((p) => before.has(p.id) && JSON.stringify(before.get(p.id)) !== JSON.stringify(p));
    const added = next.filter((p) => !before.has(p.id));
    if (!removed.length && !changed.length && !added.length) return `agents.toml: unchanged (${profiles.length} profiles)`;
    for (const p of removed) {
      await stopProfile(p, "removed from agents.toml");
      const gone = enrolled[p.id];
      if (gone) {
        delete enrolled[p.id];
        await stateWriter.save();
        await retire(gone.agentId, `profile ${p.id} was removed from agents.toml`);
      }
    }
    for (const p of changed) await stopProfile(before.get(p.id)!, "changed in agents.toml; restarting");
    profiles = next;
    await enrollProfiles();
    for (const p of [...changed, ...added]) await startProfile(p);
    reporter.changed();
    log.info("agents.toml applied", { added: added.map((p) => p.id), changed: changed.map((p) => p.id), removed: removed.map((p) => p.id) });
    const list = (what: string, ps: FleetProfile[]) => (ps.length ? [`${what} ${ps.map((p) => p.id).join(", ")}`] : []);
    return `agents.toml: applied (${[...list("added", added), ...list("restarted", changed), ...list("removed", removed)].join("; ")})`;
  }

  /** Marks a tower agent that no profile acts for any more as dead, with why (best effort). */
  async function retire(agentId: string, reason: string): Promise<void> {
    try {
      await tower.agents.updateAgentState({ agentId, state: "dead", reason });
      log.info("retired a tower agent no profile uses", { agent_id: agentId, reason });
    } catch (err) {
      log.warn("could not mark a tower agent dead", { agent_id: agentId, reason, error: toEpError(err).message });
    }
  }

  // ---- config_reload (the tower's ReloadNodeConfig, `ep node reload <node_id>`): fleet-reload.ts
  const reloadConfig = createConfigReload({
    home,
    log,
    cron,
    cronFile,
    agentsFile,
    reloadRuntimes: deps.reloadRuntimes,
    setAgentsErrors: (e) => (errors = e),
    agentsErrors,
    applyProfiles,
    publish,
    changed: () => reporter.changed(),
  });

  const fleet: Fleet = {
    settings,
    cron,
    watchdog,
    tmux,

    async start() {
      reporter.start();
      await enrollProfiles();
      // profiles removed from a valid agents.toml while epd was down: their tower agents go
      if (loaded.ok) {
        for (const id of Object.keys(profileSessions)) if (!profiles.some((p) => p.id === id)) delete profileSessions[id];
        for (const [id, gone] of Object.entries(enrolled)) {
          if (profiles.some((p) => p.id === id)) continue;
          delete enrolled[id];
          await stateWriter.save();
          await retire(gone.agentId, `profile ${id} was removed from agents.toml`);
        }
      }
      for (const p of profiles) await startProfile(p);
      await cron.start();
      reporter.changed();
      log.info("fleet started", { profiles: profiles.length, supervised: profiles.filter((p) => p.supervise).length, cron_jobs: cron.list().length, tmux_socket: settings.tmuxSocket, backend: service.kind });
    },

    async close() {
      closed = true;
      reporter.close();
      if (enrollTimer) clock.clearTimeout(enrollTimer);
      await cron.close();
      await watchdog.close();
      await signals.cancelRuns("the daemon is shutting down");
      await acp.close();
      await backend.close();
      tmux.close(); // flushes the pane logs (redacted) before the values are released below
      env.closeSessions();
      await events.close();
      redaction?.release();
      cronStore.close();
    },

    profiles: () => [...profiles],
    loadErrors: () => errors,
    findProfile,

    async signal(target, prompt, opts = {}) {
      if (!target.trim()) throw invalidField("target", "is required");
      if (!prompt.trim()) throw invalidField("prompt", "is required");
      if (prompt.length > MAX_PROMPT) throw invalidField("prompt", `is longer than ${MAX_PROMPT} characters`);
      const source = opts.source ?? "cli";
      const p = findProfile(target);
      if (p) {
        const via = await deliver(p, prompt);
        log.info("signal delivered", { profile: p.id, via, source });
        if (opts.inbox !== false) {
          publish(profileEvent(p, { type: "inbox", name: "agent.signal", status: "delivered", payload: { agent_id: towerAgentId(p.id) ?? p.id, prompt, via, source } }));
        }
        return via;
      }
      const agent = deps.enrolled?.find(target.trim());
      if (!agent) throw new EpError("agent_not_found", `no agent or profile named ${target} on this node`, { target });
      const via = deps.enrolled!.deliver(agent, prompt);
      if (opts.inbox !== false) {
        publish({ type: "inbox", name: "agent.signal", domainId: agent.domainId, agentId: agent.id, status: "delivered", payload: { agent_id: agent.id, prompt, via, source } });
      }
      return via;
    },

    handleLink(msg) {
      if (msg.kind === "config_reload") {
        const requestId = typeof msg.data?.request_id === "string" ? msg.data.request_id : undefined;
        reloadConfig({ requestId, source: "tower" }).catch((err: Error) => log.error("config reload failed", { error: err.message }));
        return true;
      }
      if (msg.kind !== "signal" && msg.kind !== "supervise") return false;
      const p = findProfile(msg.agentId);
      if (!p) return false;
      const data = (msg.data ?? {}) as JsonObject;
      if (msg.kind === "signal") {
        const prompt = typeof data.prompt === "string" ? data.prompt : "";
        // the tower recorded the inbox event when it accepted the signal
        fleet.signal(p.id, prompt, { source: "tower", inbox: false }).catch((err: Error) => {
          log.warn("signal from the tower not delivered", { profile: p.id, error: err.message });
          publish(profileEvent(p, { type: "matrix", name: "agent.signal.failed", status: "failed", payload: { error: err.message, source: "tower" } }));
        });
        return true;
      }
      const op = typeof data.op === "string" ? data.op : "";
      const act = async () => {
        supervised(p.id);
        if (op === "restart") await watchdog.restart(p.id);
        else if (op === "pause") watchdog.pause(p.id);
        else if (op === "resume") watchdog.resume(p.id);
        else throw new EpError("invalid_argument", `unknown supervise op ${JSON.stringify(op)}`, { field: "op" });
      };
      act().catch((err: Error) => {
        log.warn("supervise command from the tower failed", { profile: p.id, op, error: err.message });
        publish(profileEvent(p, { type: "matrix", name: "supervise.failed", status: "failed", payload: { op, error: err.message, source: "tower" } }));
      });
      return true;
    },

    async views() {
      const statuses = new Map(watchdog.list().map((s) => [s.id, s]));
      return Promise.all(profiles.map((p) => view(p, statuses.get(p.id))));
    },
    supervised,
    view,
    towerAgentId,
    claimers,
    taskPlace(profileId) {
      const p = profiles.find((x) => x.id === profileId);
      return p ? { cwd: cwdOf(p), env: profileEnv(p, true) } : undefined;
    },
    reloadConfig,
    stateSnapshot,
    reportState: () => reporter.changed(),
  };
  return fleet;
}

