// One task's run: a fresh work/<task_id>/ directory (or the profile's cwd), a secrets session, the
// runtime started with the run's environment, progress batched to the tower, the lease
// heartbeated (a refused heartbeat stops the run), and the outcome delivered until acknowledged.
import { existsSync, mkdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { ClockTimer } from "../../common/clock.js";
import { iso } from "../../common/clock.js";
import { toEpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import { TaskStatus, type Task } from "../../gen/ep/tower/v1/resources_pb.js";
import { createPermissionAsker } from "./permission-asker.js";
import { frameMsg, type ProgressFrame, type RunMcp, type RunResult } from "../runtimes/runtime.js";
import type { Permission, RunPlaces } from "../runtimes/confine.js";
import { isRuntimeKind } from "../runtimes/runtime.js";
import { writeRunMcpConfig } from "../mcp/agent-config.js";
import type { LocalAgentRecord } from "./agent-store.js";
import { createFrameBatcher } from "./frame-batcher.js";
import { closeWorkspace, openWorkspace, type Workspace } from "./task-workspace.js";
import type { InflightEntry, TaskOutcome } from "./journal.js";
import { processStartTime } from "./orphans.js";
import { createRunDirs, dropStaleConfig, PARENTS_DIR, type RunDirs } from "./run-dirs.js";
import { loadParents, parentContext, withParentRef, writeParentFiles } from "./parent-results.js";
import { refusedByTower } from "./report.js";
import type { Run, Slot, WorkerDeps, WorkerState } from "./worker-types.js";
import { msOf } from "../../common/vocab.js";
import { clearRunRecord, runRecordOf, type RunRecord } from "../runtimes/run-record.js";

export const OUTPUT_LIMIT = 64 * 1024;

export interface RunHooks {
  /** reports the outcome (in the background, until the tower acknowledges it) */
  deliver(entry: InflightEntry): void;
  /** the run ended and nothing will be reported (cancelled, lease lost): the tower hears the agent is idle */
  idleWithoutOutcome(agentId: string): void;
}

const tail = (text: string) => (text.length > OUTPUT_LIMIT ? text.slice(-OUTPUT_LIMIT) : text);

function promptOf(task: Task): string {
  const p = task.input?.prompt;
  if (typeof p === "string" && p.trim()) return p;
  return [task.title, task.description].filter(Boolean).join("\n\n");
}

export function createRunner(deps: WorkerDeps, st: WorkerState, hooks: RunHooks) {
  const { tower, clock, log, journal, sessions } = deps;
  const dirs = createRunDirs(() => clock.now());

  function startRun(agent: LocalAgentRecord, slot: Slot, task: Task, parents?: readonly Task[]): void {
    const entry: InflightEntry = {
      taskId: task.id,
      agentId: agent.id,
      leaseId: task.leaseId,
      state: "running",
      startedAt: iso(clock.now()),
    };
    let markEnded!: () => void;
    const ended = new Promise<void>((resolve) => (markEnded = resolve));
    const run: Run = {
      task,
      agent,
      entry,
      ended,
      markEnded,
      done: Promise.resolve(),
      ...(parents?.length ? { parents } : {}),
    };
    st.runs.set(task.id, run);
    run.done = execute(run, () => {
      // the subprocess is over: the agent is free (its outcome goes out in the background)
      st.runs.delete(task.id);
      if (slot.taskId === task.id) {
        slot.state = "idle";
        slot.taskId = undefined;
      }
    })
      .catch((err: Error) =>
        log.error("task run failed unexpectedly", { task_id: task.id, error: err.message, stack: err.stack }),
      )
      .finally(() => {
        run.markEnded();
        if (st.runs.get(task.id) === run) st.runs.delete(task.id);
        if (slot.taskId === task.id) {
          slot.state = "idle";
          slot.taskId = undefined;
        }
      });
  }

  async function execute(run: Run, free: () => void): Promise<void> {
    const { task, agent, entry } = run;
    const tlog = log.child({ task_id: task.id, agent_id: agent.id });
    const record = freshRecord(deps, task.id, tlog);
    journal
      .put(entry)
      .catch((err: Error) =>
        tlog.warn("journal not written; a restart would not know this run", { error: err.message }),
      );
    if (!(await announceStart(deps, run, tlog))) {
      free();
      hooks.idleWithoutOutcome(agent.id);
      return;
    }

    const { workDir, cwd, placeEnv, mcp, permission, parentFiles } = await preparePlace(deps, dirs, run, tlog);
    const session = sessions.open({ taskId: task.id, agentId: agent.id, domainId: agent.domainId });
    const redactor = deps.redactor?.(session.id);
    const batcher = createFrameBatcher({
      clock,
      windowMs: deps.progressWindowMs ?? 50,
      ...(redactor ? { redact: (f: ProgressFrame) => redactor.frame(f) } : {}),
      send: async (frames) => {
        const report = { taskId: task.id, agentId: agent.id, leaseId: task.leaseId, frames: frames.map(frameMsg) };
        // up the session while it is up, else as a ReportProgress call
        const up = deps.uplink?.();
        await (up?.carriesOutcomes() ? up.progress(report) : tower.work.reportProgress(report)).catch((err: unknown) =>
          tlog.debug("progress not delivered", { error: toEpError(err).message }),
        );
      },
    });
    const report = (f: ProgressFrame) => batcher.push(f);

    let result: RunResult;
    let stopBeating: (() => void) | undefined;
    let workspace: Workspace | undefined;
    try {
      // a task naming a repository runs in its own worktree (its setup first, as progress)
      const env = runEnv(deps, run, session.id, placeEnv, mcp);
      // a task with parents: their results in the run directory, their branch as its base
      const parents = task.dependsOn.length ? await loadParents(tower, task, run.parents) : [];
      if (parents.length) {
        Object.assign(env, {
          EP_PARENT_IDS: parents.map((p) => p.id).join(","),
          EP_PARENTS_DIR: writeParentFiles(workDir, parents, parentFiles),
        });
        task.input = withParentRef(task.input, parents);
        // a recycled folder's
      } else if (parentFiles) rmSync(join(workDir, PARENTS_DIR), { recursive: true, force: true });
      workspace = await openWorkspace(deps, run, report, env);
      if (workspace?.setupFailed) throw workspace.setupFailed;
      run.handle = deps.runtimes.start(agent.runtime, {
        taskId: task.id,
        agentId: agent.id,
        prompt: promptOf(task) + parentContext(task.id, parents),
        input: (task.input ?? {}) as Record<string, unknown>,
        cwd: workspace?.record.path ?? cwd,
        env,
        places: runPlaces(deps, workDir, env, workspace),
        ...(mcp ? { mcp } : {}),
        // a workspace run's change is committed by epd after it (closeWorkspace): a restart retries it rather than
        // report it
        ...(record ? { record: workspace ? { output: record.output } : record } : {}),
        ...(redactor ? { redactStream: () => redactor.stream() } : {}),
        onFrame: report,
        ...(permission ? { permission } : {}),
        askPermission: createPermissionAsker({
          approvals: tower.approvals,
          clock,
          log: tlog,
          taskId: task.id,
          agentId: agent.id,
          onFrame: report,
        }),
      });
      if (run.stop) void run.handle.cancel(run.stop);
      const pid = run.handle.pid ?? (await run.handle.spawned);
      if (pid) {
        session.pid = pid;
        entry.pid = pid;
        entry.pidStart = processStartTime(pid);
        journal
          .put(entry)
          .catch((err: Error) =>
            tlog.warn("journal not written; a restart would not know this run", { error: err.message }),
          );
      }
      stopBeating = keepLease(deps, st, run, tlog);
      result = await run.handle.result;
    } catch (err) {
      const e = toEpError(err);
      result = { ok: false, output: "", error: e.message, errorCode: e.code };
    } finally {
      stopBeating?.();
      sessions.end(session.id);
      mcp?.revoke(); // the run's door to EP's tools closes with the run
    }
    await batcher.flush();
    if (redactor) result = redactor.result(result);
    redactor?.release();

    const changes = workspace && (await closeWorkspace(deps, run, workspace, result.ok && !run.stop, tlog));
    const seconds = (clock.now() - Date.parse(entry.startedAt)) / 1000;
    if (run.stop === "tower_cancel" || run.stop === "lease_lost") {
      deps.onRunEnded?.({
        runtime: agent.runtime,
        outcome: run.stop === "tower_cancel" ? "cancelled" : "lease_lost",
        seconds,
      });
      tlog.info("run stopped", { why: run.stop });
      await journal.remove(task.id);
      free();
      hooks.idleWithoutOutcome(agent.id);
      return;
    }
    const outcome = { ...outcomeOf(result, run.stop), ...(changes ? { workspace: changes } : {}) };
    deps.onRunEnded?.({ runtime: agent.runtime, outcome: outcome.ok ? "succeeded" : "failed", seconds });
    tlog.info("run finished", {
      ok: outcome.ok,
      exit_code: outcome.exitCode,
      error: outcome.error,
      ...(outcome.denials ? { denials: outcome.denials.length } : {}),
    });
    // the run's process group is gone (RunHandle.result): an empty directory can serve the next run
    dirs.release(workDir);
    free();
    hooks.deliver({ ...entry, state: "reporting", outcome });
  }

  return { startRun };
}

/** Tells the tower the run starts (unless the claim did); false when it refuses (the task is no longer ours). */
async function announceStart(deps: WorkerDeps, run: Run, tlog: Logger): Promise<boolean> {
  const { tower, journal } = deps;
  if (run.task.status === TaskStatus.RUNNING) return true;
  try {
    await tower.work.startTask({ taskId: run.task.id, agentId: run.agent.id, leaseId: run.task.leaseId });
  } catch (err) {
    const refused = refusedByTower(err);
    if (refused) {
      tlog.warn("task not started; dropping it", { code: refused.code, error: refused.message });
      await journal.remove(run.task.id);
      return false;
    }
    tlog.warn("start not acknowledged; running anyway", { error: toEpError(err).message });
  }
  return true;
}

/**
 * work/<task_id>/ is fresh for every run: the run's cwd, and where its MCP config is written.
 * A profile's task runs in the profile's own cwd with its env (its config stays out of it).
 */
async function preparePlace(deps: WorkerDeps, dirs: RunDirs, run: Run, tlog: Logger) {
  const { task, agent } = run;
  const workDir = join(deps.home, "work", task.id);
  const { recycled, parentFiles } = await dirs.fresh(workDir, task.dependsOn.length > 0);
  const place = agent.profile ? deps.profiles?.place(agent.profile) : undefined;
  if (agent.profile && !place)
    tlog.warn("profile gone from agents.toml; the task runs in a fresh directory", { profile: agent.profile });
  const cwd = place?.cwd ?? workDir;
  if (place) await mkdir(cwd, { recursive: true, mode: 0o700 });
  const mcp = grantMcp(deps, run, workDir, place?.permission, tlog);
  if (recycled && !mcp) dropStaleConfig(workDir);
  return { workDir, cwd, placeEnv: place?.env, mcp, permission: place?.permission, parentFiles };
}

/**
 * The run's own door to EP's tools (URL, token, and claude's config file in its directory), or none when epd serves
 * none.
 */
function grantMcp(
  deps: WorkerDeps,
  run: Run,
  workDir: string,
  profilePermission: Permission | undefined,
  tlog: Logger,
): (RunMcp & { revoke(): void }) | undefined {
  if (!deps.mcp) return undefined;
  const { task, agent } = run;
  const runtime = isRuntimeKind(agent.runtime) ? deps.runtimes.config[agent.runtime] : undefined;
  const ask =
    (profilePermission ?? runtime?.permission) === "ask"
      ? { timeoutMs: (runtime?.permissionTimeoutSeconds ?? 600) * 1000 }
      : undefined;
  const grant = deps.mcp.grant({
    taskId: task.id,
    agentId: agent.id,
    domainId: agent.domainId,
    ...(ask ? { ask } : {}),
  });
  try {
    return { url: grant.url, token: grant.token, configFile: writeRunMcpConfig(workDir, grant), revoke: grant.revoke };
  } catch (err) {
    grant.revoke();
    tlog.warn("MCP config not written; the run starts without the EP tools", { error: toEpError(err).message });
    return undefined;
  }
}

/** Where a run lives, for its confinement: its directory, its repository's metadata, what it must not see. */
function runPlaces(
  deps: WorkerDeps,
  workDir: string,
  env: Record<string, string>,
  workspace: Workspace | undefined,
): RunPlaces {
  return {
    runDir: workDir,
    writable: workspace ? commitPlaces(workspace.record) : [],
    hidden: deps.hidden ?? [],
    sockets: [deps.secretsSocket],
    readable: [deps.binDir],
    home: env.HOME ?? deps.baseEnv.HOME ?? "/nonexistent",
  };
}

/**
 * What a commit in a task's worktree writes in its repository, and no more: the object store, the
 * worktree's own metadata (index, HEAD, logs) and the folder of its branch's ref and reflog. The
 * rest of the repository stays read-only to the run: its config, its other branches (main), the
 * main checkout. A branch at the top of refs/heads (a task naming `branch = "fix"`) shares its
 * folder with every other top-level branch (docs/workspaces.md).
 */
function commitPlaces(record: { repo: string; path: string; branch: string }): string[] {
  const dotGit = join(record.repo, ".git");
  const common = existsSync(dotGit) && statSync(dotGit).isDirectory() ? dotGit : record.repo;
  let own: string | undefined;
  try {
    own = /^gitdir:\s*(.+)$/m.exec(readFileSync(join(record.path, ".git"), "utf8"))?.[1]?.trim();
  } catch {
    // no worktree file: only the shared places below
  }
  const branchDir = dirname(record.branch) === "." ? "" : dirname(record.branch);
  const refs = join(common, "refs", "heads", branchDir);
  const logs = join(common, "logs", "refs", "heads", branchDir);
  for (const dir of [refs, logs]) mkdirSync(dir, { recursive: true });
  return [join(common, "objects"), ...(own ? [own] : []), refs, logs];
}

function runEnv(
  deps: WorkerDeps,
  run: Run,
  sessionId: string,
  placeEnv: Record<string, string> | undefined,
  mcp: RunMcp | undefined,
): Record<string, string> {
  const { task, agent } = run;
  return {
    ...(placeEnv ?? deps.baseEnv),
    PATH: placeEnv?.PATH ?? [deps.binDir, deps.baseEnv.PATH ?? "/usr/local/bin:/usr/bin:/bin"].join(":"),
    EP_SECRETS_SOCKET: deps.secretsSocket,
    EP_SECRETS_SESSION: sessionId,
    EP_TASK_ID: task.id,
    EP_AGENT_ID: agent.id,
    EP_DOMAIN_ID: agent.domainId,
    EP_MISSION_ID: task.missionId,
    EP_BASE_URL: deps.tower.baseUrl,
    ...(mcp ? { EP_MCP_CONFIG: mcp.configFile, EP_MCP_URL: mcp.url, EP_MCP_TOKEN: mcp.token } : {}),
  };
}

/** Heartbeats the lease every third of its length; a refusal (conflict, not found) stops the run. Returns the stop. */
function keepLease(deps: WorkerDeps, st: WorkerState, run: Run, tlog: Logger): () => void {
  const { tower, clock } = deps;
  const { task, agent } = run;
  let timer: ClockTimer | undefined;
  const leaseMs = Math.max(300, msOf(task.leaseExpiresAt) - msOf(task.updatedAt) || 60_000);
  const lost = (err: unknown) => {
    const refused = refusedByTower(err);
    if (refused && (refused.errorClass === "conflict" || refused.errorClass === "not_found")) {
      tlog.warn("lease lost; stopping the run", { code: refused.code, error: refused.message });
      run.stop ??= "lease_lost";
      void run.handle?.cancel(`lease lost: ${refused.message}`);
      return;
    }
    tlog.warn("heartbeat failed; retrying", { error: (refused ?? toEpError(err)).message });
    if (st.runs.has(task.id)) beat();
  };
  const beat = () => {
    timer = clock.setTimeout(
      () => {
        tower.work.heartbeatTask({ taskId: task.id, agentId: agent.id, leaseId: task.leaseId }).then(() => {
          if (st.runs.has(task.id) && !run.stop) beat();
        }, lost);
      },
      Math.floor(leaseMs / 3),
    );
  };
  beat();
  return () => {
    if (timer) clock.clearTimeout(timer);
  };
}

/**
 * The run's record (run-record.ts), cleared of an earlier run of the same task before this one is
 * journaled; none when it cannot be (the run then keeps its output's tail in memory only).
 */
function freshRecord(deps: WorkerDeps, taskId: string, tlog: Logger): Required<RunRecord> | undefined {
  const record = runRecordOf(deps.home, taskId);
  try {
    clearRunRecord(record);
    return record;
  } catch (err) {
    tlog.warn("run record not cleared; the run keeps no spool and no exit status on disk", {
      error: (err as Error).message,
    });
    return undefined;
  }
}

/**
 * The outcome of a run that ended while epd was down, from its record: what the run itself would
 * have made of the same exit (a status 0 succeeded, any other failed for good).
 */
export function outcomeOfExit(finished: { exitCode: number; outputTail: string }): TaskOutcome {
  const { exitCode, outputTail: output } = finished;
  if (exitCode === 0) return outcomeOf({ ok: true, output, exitCode });
  return outcomeOf({ ok: false, output, exitCode, error: `exited with code ${exitCode} (while epd was down)` });
}

function outcomeOf(result: RunResult, stop?: Run["stop"]): TaskOutcome {
  // what the runtime reported beside the answer: usage, and the tool calls it was refused
  const reported = {
    ...(result.usage ? { usage: result.usage } : {}),
    ...(result.denials?.length ? { denials: result.denials } : {}),
  };
  if (result.ok)
    return { ok: true, output: tail(result.output), exitCode: result.exitCode, retryable: false, ...reported };
  return {
    ok: false,
    output: tail(result.output),
    exitCode: result.exitCode,
    error:
      stop === "shutdown"
        ? "epd shut down before the task finished"
        : result.error || (result.timedOut ? "timed out" : "failed"),
    // a run that failed on its own is final (the operator retries it); one we interrupted may run elsewhere
    retryable: stop === "shutdown",
    ...reported,
  };
}
