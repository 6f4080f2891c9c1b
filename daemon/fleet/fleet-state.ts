// The node state the tower shows (list_cron_jobs, get_supervision): each cron job and each
// supervised agent in the report's shape.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ReportNodeStateRequestSchema } from "../../gen/ep/tower/v1/fleet_pb.js";
import type { CronDispatcher } from "../cron/index.js";
import type { SupervisedStatus } from "../supervise/index.js";
import type { FleetProfile } from "./agents-file.js";

type NodeState = MessageInitShape<typeof ReportNodeStateRequestSchema>;
type CronJob = ReturnType<CronDispatcher["list"]>[number];

export function cronJobState(j: CronJob): NonNullable<NodeState["cronJobs"]>[number] {
  return {
    name: j.name,
    kind: j.kind,
    schedule: j.schedule ?? "",
    interval: j.interval ?? "",
    dispatch: j.dispatch,
    session: j.session ?? "",
    prompt: j.prompt,
    missed: j.missed,
    nextFireAt: j.nextFireAt ?? "",
    running: j.running,
    line: j.line,
    ...(j.lastFire
      ? {
          lastFire: {
            slot: j.lastFire.slot,
            firedAt: j.lastFire.firedAt,
            status: j.lastFire.status,
            error: j.lastFire.error ?? "",
            ...(j.lastFire.exitCode !== undefined ? { exitCode: j.lastFire.exitCode } : {}),
          },
        }
      : {}),
  };
}

export function supervisedState(st: SupervisedStatus, p: FleetProfile | undefined, agentId: string, domainId: string): NonNullable<NodeState["supervised"]>[number] {
  return {
    profile: st.id,
    agentId,
    domainId,
    name: st.name,
    runtime: p?.runtime ?? "",
    backend: p?.runtime === "muxhost_hosted" ? "tmux" : p?.runtime === "vendorA_agent_acp" ? "acp" : st.backend,
    state: st.state,
    paused: st.paused,
    pid: st.pid ?? 0,
    restarts: st.restarts,
    lastRestartAt: st.lastRestartAt ?? "",
    lastRestartReason: st.lastRestartReason ?? "",
    lastCheckAt: st.lastCheckAt ?? "",
    nextRetryAt: st.nextRetryAt ?? "",
    detail: st.detail ?? "",
  };
}
