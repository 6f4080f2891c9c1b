// A prompt delivered to an agent (`ep agent signal`, or a `signal` on the link) becomes a new
// one-shot run of the agent's runtime. muxhost_hosted agents get their prompt typed into their
// pane by the supervision part; until that is wired, it is logged and refused here.
import type { JsonObject } from "@bufbuild/protobuf";
import { randomBytes } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { EpError } from "../../common/errors.js";
import type { LocalAgentRecord } from "./agent-store.js";
import type { ProgressFrame } from "../runtimes/runtime.js";
import { createFrameBatcher } from "./frame-batcher.js";
import { OUTPUT_LIMIT } from "./task-run.js";
import type { WorkerDeps } from "./worker-types.js";

/** What the one-shot signal runs need: the worker's runtime, session, secrets and environment settings. */
export type SignalRunnerDeps = Pick<
  WorkerDeps,
  "tower" | "runtimes" | "sessions" | "clock" | "log" | "home" | "secretsSocket" | "binDir" | "baseEnv" | "redactor"
>;

export type SignalDelivery = "one_shot_run";

/** Starts the run and returns at once; the run's frames and end are published as events. */
export function createSignalRunner(deps: SignalRunnerDeps) {
  const live = new Set<Promise<void>>();
  return {
    deliver(agent: LocalAgentRecord, prompt: string): SignalDelivery {
      if (!prompt.trim()) throw new EpError("invalid_argument", "prompt: is required", { field: "prompt" });
      if (agent.runtime === "muxhost_hosted") {
        deps.log.warn("signal to a muxhost_hosted agent not delivered: pane delivery belongs to fleet supervision", {
          agent_id: agent.id,
        });
        throw new EpError(
          "unavailable",
          `agent ${agent.id} runs in a tmux pane; signals to hosted ` +
            `agents need fleet supervision (agents.toml profiles)`,
        );
      }
      const runId = `sig_${randomBytes(6).toString("hex")}`;
      const p = run(agent, prompt, runId).catch((err: Error) =>
        deps.log.error("signal run failed", { agent_id: agent.id, error: err.message }),
      );
      live.add(p);
      void p.finally(() => live.delete(p));
      return "one_shot_run";
    },
    async close(): Promise<void> {
      await Promise.all([...live]);
    },
  };

  async function publish(
    events: { type: string; name: string; status?: string; payload: JsonObject }[],
    agent: LocalAgentRecord,
  ) {
    await deps.tower.nodes
      .publishEvents({
        events: events.map((e) => ({ ...e, domainId: agent.domainId, agentId: agent.id, status: e.status ?? "" })),
      })
      .catch((err: Error) => deps.log.debug("signal events not published", { error: err.message }));
  }

  async function run(agent: LocalAgentRecord, prompt: string, runId: string): Promise<void> {
    const cwd = join(deps.home, "work", runId);
    await mkdir(cwd, { recursive: true, mode: 0o700 });
    const session = deps.sessions.open({ taskId: runId, agentId: agent.id, domainId: agent.domainId });
    const redactor = deps.redactor?.(session.id);
    const batcher = createFrameBatcher({
      clock: deps.clock,
      windowMs: 100,
      ...(redactor ? { redact: (f: ProgressFrame) => redactor.frame(f) } : {}),
      send: (frames) =>
        publish(
          frames.map((f) => ({
            type: "progress",
            name: "agent.signal.progress",
            payload: { run_id: runId, kind: f.kind, text: f.text },
          })),
          agent,
        ),
    });
    try {
      const handle = deps.runtimes.start(agent.runtime, {
        taskId: runId,
        agentId: agent.id,
        prompt,
        input: { prompt, command: prompt },
        cwd,
        env: {
          ...deps.baseEnv,
          PATH: [deps.binDir, deps.baseEnv.PATH ?? "/usr/bin:/bin"].join(":"),
          EP_SECRETS_SOCKET: deps.secretsSocket,
          EP_SECRETS_SESSION: session.id,
          EP_AGENT_ID: agent.id,
          EP_DOMAIN_ID: agent.domainId,
          EP_BASE_URL: deps.tower.baseUrl,
        },
        onFrame: (f) => batcher.push(f),
      });
      let result = await handle.result;
      await batcher.flush();
      if (redactor) result = redactor.result(result);
      await publish(
        [
          {
            type: "matrix",
            name: "agent.signal.finished",
            status: result.ok ? "succeeded" : "failed",
            payload: {
              run_id: runId,
              ok: result.ok,
              output: result.output.slice(-OUTPUT_LIMIT),
              error: result.error ?? "",
              exit_code: result.exitCode ?? null,
            },
          },
        ],
        agent,
      );
    } finally {
      deps.sessions.end(session.id);
      redactor?.release();
    }
  }
}

export type SignalRunner = ReturnType<typeof createSignalRunner>;
