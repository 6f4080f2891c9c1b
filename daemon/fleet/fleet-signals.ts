// Delivering a signal (a prompt) to a profile agent, the way its runtime takes one: keys sent
// to its tmux pane, a prompt on its ACP session, or a one-shot run of its CLI. Each run's
// progress and end are events (`agent.signal.progress`, `agent.signal.finished`).
import { randomBytes } from "node:crypto";
import { mkdir } from "node:fs/promises";
import type { Clock } from "../../common/clock.js";
import { EpError } from "../../common/errors.js";
import type { RunHandle } from "../runtimes/runtime.js";
import type { RuntimeRegistry } from "../runtimes/registry.js";
import type { Watchdog } from "../supervise/index.js";
import { createFrameBatcher } from "../worker/frame-batcher.js";
import type { FleetProfile } from "./agents-file.js";
import type { FleetEvent } from "./events.js";
import type { Delivery } from "./fleet-types.js";
import type { AcpHost, HostedAgent, TmuxHost } from "./hosts.js";

export interface SignalDeliveryDeps {
  clock: Clock;
  runtimes: RuntimeRegistry;
  tmux: TmuxHost;
  acp: AcpHost;
  watchdog: Watchdog;
  hosted(p: FleetProfile): HostedAgent;
  cwdOf(p: FleetProfile): string;
  agentEnv(p: FleetProfile, full: boolean): Record<string, string>;
  towerAgentId(profileId: string): string | undefined;
  progress(p: FleetProfile | undefined, runId: string, f: { kind: string; text: string }): void;
  publish(e: FleetEvent): void;
  profileEvent(p: FleetProfile | undefined, e: Omit<FleetEvent, "agentId" | "domainId">): FleetEvent;
}

export function createSignalDelivery(d: SignalDeliveryDeps) {
  const { clock, tmux, acp, watchdog, hosted, cwdOf, agentEnv, towerAgentId, progress, publish, profileEvent } = d;
  const liveRuns = new Set<RunHandle>();
  async function oneShot(p: FleetProfile, prompt: string): Promise<void> {
    const runId = `sig_${randomBytes(6).toString("hex")}`;
    const cwd = cwdOf(p);
    await mkdir(cwd, { recursive: true, mode: 0o700 });
    const batcher = createFrameBatcher({
      clock,
      windowMs: 100,
      send: async (frames) => frames.forEach((f) => progress(p, runId, f)),
    });
    const handle = d.runtimes.start(p.runtime, {
      taskId: runId,
      agentId: towerAgentId(p.id) ?? p.id,
      prompt,
      input: { prompt, command: prompt },
      cwd,
      env: agentEnv(p, true),
      onFrame: (f) => batcher.push(f),
    });
    liveRuns.add(handle);
    void handle.result.then(async (result) => {
      liveRuns.delete(handle);
      await batcher.flush();
      publish(
        profileEvent(p, {
          type: "matrix",
          name: "agent.signal.finished",
          status: result.ok ? "succeeded" : "failed",
          payload: {
            run_id: runId,
            ok: result.ok,
            output: result.output.slice(-8192),
            error: result.error ?? "",
            ...(result.exitCode !== undefined ? { exit_code: result.exitCode } : {}),
          },
        }),
      );
    });
  }

  async function deliver(p: FleetProfile, prompt: string): Promise<Delivery> {
    if (p.runtime === "muxhost_hosted") {
      const agent = hosted(p);
      if (!(await tmux.isAlive(p.session))) {
        if (p.supervise && watchdog.list().some((s) => s.id === p.id && s.paused)) {
          throw new EpError(
            "unavailable",
            `agent ${p.id}'s tmux pane is not running and its supervision is paused; resume or restart it first`,
          );
        }
        await tmux.ensure(agent);
      }
      await tmux.send(p.session, prompt);
      return "tmux_send_keys";
    }
    if (p.runtime === "vendorA_agent_acp") {
      const agent = hosted(p);
      const runId = `acp_${randomBytes(6).toString("hex")}`;
      await acp.start(agent, runId);
      void acp.prompt(agent, prompt, runId).then(
        (turn) =>
          publish(
            profileEvent(p, {
              type: "matrix",
              name: "agent.signal.finished",
              status: turn.stopReason === "end_turn" ? "succeeded" : "failed",
              payload: {
                run_id: runId,
                ok: turn.stopReason === "end_turn",
                stop_reason: turn.stopReason,
                output: turn.text.slice(-8192),
              },
            }),
          ),
        (err: Error) =>
          publish(
            profileEvent(p, {
              type: "matrix",
              name: "agent.signal.finished",
              status: "failed",
              payload: { run_id: runId, ok: false, error: err.message },
            }),
          ),
      );
      return "acp_prompt";
    }
    await oneShot(p, prompt);
    return "one_shot_run";
  }

  return {
    deliver,
    /** Cancels the one-shot runs still going (shutdown). */
    async cancelRuns(reason: string): Promise<void> {
      await Promise.all([...liveRuns].map((h) => h.cancel(reason)));
    },
  };
}
