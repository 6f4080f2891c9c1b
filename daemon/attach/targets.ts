// What `attach <agent>` means on this node: a muxhost_hosted profile's tmux pane, the pane of a
// muxhost_hosted task run in progress, or else the agent's one-shot runs followed read-only.
import { EpError, invalidField } from "../../common/errors.js";
import type { Fleet } from "../fleet/index.js";
import { taskSessionName } from "../runtimes/muxhost-hosted.js";
import type { AgentStore } from "../worker/agent-store.js";
import type { AttachHub, AttachTarget } from "./attach-hub.js";

export interface TargetDeps {
  fleet: Pick<Fleet, "findProfile" | "towerAgentId" | "settings">;
  agents: Pick<AgentStore, "find">;
  hub: Pick<AttachHub, "currentRun" | "hasRuns">;
  /** The muxhost_hosted runtime's tmux socket (runtimes.toml), where task runs live. */
  runSocketName?: string;
}

export type ResolveTarget = (target: string) => AttachTarget;

export function createTargetResolver(d: TargetDeps): ResolveTarget {
  return (raw) => {
    const target = raw.trim();
    if (!target) throw invalidField("agent", "is required (an agent id, or a profile's id, name or tmux session)");
    const profile = d.fleet.findProfile(target);
    if (profile?.runtime === "muxhost_hosted") {
      return {
        kind: "tmux",
        agentId: d.fleet.towerAgentId(profile.id) ?? profile.id,
        session: profile.session,
        socketName: d.fleet.settings.tmuxSocket,
      };
    }
    // the id the runs of this agent carry (profiles without a tower id run under their own id)
    const agentId = profile ? (d.fleet.towerAgentId(profile.id) ?? profile.id) : (d.agents.find(target)?.id ?? target);
    const run = d.hub.currentRun(agentId);
    if (run?.runtime === "muxhost_hosted")
      return { kind: "tmux", agentId, session: taskSessionName(run.taskId), socketName: d.runSocketName };
    if (profile || d.agents.find(target) || d.hub.hasRuns(agentId)) return { kind: "run", agentId };
    throw new EpError("agent_not_found", `no agent or profile named ${target} on this node`, { agent: target });
  };
}
