// The node state the tower shows (list_cron_jobs, get_supervision): each cron job and each
// supervised agent in the report's shape.
import type { MessageInitShape } from "@bufbuild/protobuf";
import {
  CronFireStatusSchema,
  CronKindSchema,
  type CronFireStatus,
  type CronKind as CronKindValue,
  type ReportNodeStateRequestSchema,
} from "../../gen/ep/tower/v1/fleet_pb.js";
import type { CronDispatcher } from "../cron/index.js";
import type { SupervisedStatus } from "../supervise/index.js";
import type { FleetProfile } from "./agents-file.js";
import type { EnrolledState, ProfileView } from "./fleet-types.js";
import type { AcpHost, TmuxHost } from "./hosts.js";
import { enumOf, timestampOf } from "../../common/vocab.js";
import { RuntimeSchema, type Runtime } from "../../gen/ep/tower/v1/resources_pb.js";

type NodeState = MessageInitShape<typeof ReportNodeStateRequestSchema>;
type CronJob = ReturnType<CronDispatcher["list"]>[number];

export function cronJobState(j: CronJob): NonNullable<NodeState["cronJobs"]>[number] {
  return {
    name: j.name,
    kind: enumOf<CronKindValue>(CronKindSchema, j.kind, "kind"),
    schedule: j.schedule ?? "",
    interval: j.interval ?? "",
    dispatch: j.dispatch,
    session: j.session ?? "",
    prompt: j.prompt,
    missed: j.missed,
    nextFireAt: timestampOf(j.nextFireAt ?? ""),
    running: j.running,
    line: j.line,
    ...(j.lastFire
      ? {
          lastFire: {
            slot: j.lastFire.slot,
            firedAt: timestampOf(j.lastFire.firedAt),
            status: enumOf<CronFireStatus>(CronFireStatusSchema, j.lastFire.status, "status"),
            error: j.lastFire.error ?? "",
            ...(j.lastFire.exitCode !== undefined ? { exitCode: j.lastFire.exitCode } : {}),
          },
        }
      : {}),
  };
}

export function supervisedState(
  st: SupervisedStatus,
  p: FleetProfile | undefined,
  agentId: string,
  domainId: string,
): NonNullable<NodeState["supervised"]>[number] {
  return {
    profile: st.id,
    agentId,
    domainId,
    name: st.name,
    runtime: enumOf<Runtime>(RuntimeSchema, p?.runtime ?? "", "runtime"),
    backend: p?.runtime === "muxhost_hosted" ? "tmux" : p?.runtime === "vendorA_agent_acp" ? "acp" : st.backend,
    state: st.state,
    paused: st.paused,
    pid: st.pid ?? 0,
    restarts: st.restarts,
    lastRestartAt: timestampOf(st.lastRestartAt ?? ""),
    lastRestartReason: st.lastRestartReason ?? "",
    lastCheckAt: timestampOf(st.lastCheckAt ?? ""),
    nextRetryAt: timestampOf(st.nextRetryAt ?? ""),
    detail: st.detail ?? "",
  };
}

/** A profile as `ep agent ls` and the console show it: state and pid from supervision or its host. */
export async function profileView(
  p: FleetProfile,
  status: SupervisedStatus | undefined,
  x: {
    tmux: TmuxHost;
    acp: AcpHost;
    tmuxSocket: string;
    towerAgentId(id: string): string | undefined;
    enrolled: Record<string, EnrolledState>;
  },
): Promise<ProfileView> {
  const { tmux, acp, towerAgentId, enrolled } = x;
  let state = "idle";
  let pid = 0;
  if (status) {
    state = status.state;
    pid = status.pid ?? 0;
  } else if (p.runtime === "muxhost_hosted") {
    const alive = await tmux.isAlive(p.session).catch(() => false);
    state = alive ? "running" : "dead";
    pid = alive ? ((await tmux.pid(p.session).catch(() => undefined)) ?? 0) : 0; // 0: unknown (the pane is going away)
  } else if (p.runtime === "vendorA_agent_acp" && acp.isAlive(p.id)) {
    state = "running";
    pid = acp.pid(p.id) ?? 0;
  }
  const backend =
    p.runtime === "muxhost_hosted"
      ? `tmux (-L ${x.tmuxSocket})`
      : p.runtime === "vendorA_agent_acp"
        ? "acp session"
        : status?.backend;
  const detail = [
    status?.detail,
    status?.lastRestartReason && `last restart: ${status.lastRestartReason}`,
    status?.nextRetryAt && `next retry at ${status.nextRetryAt}`,
    status && `backend ${backend}`,
    towerAgentId(p.id) && `tower agent ${towerAgentId(p.id)}`,
  ]
    .filter(Boolean)
    .join("; ");
  return {
    id: p.id,
    domainId: enrolled[p.id]?.domainId ?? p.domain ?? "",
    name: p.name,
    runtime: p.runtime,
    capabilities: p.capabilities,
    state,
    supervised: p.supervise,
    paused: status?.paused ?? false,
    pid,
    session: p.runtime === "muxhost_hosted" ? p.session : "",
    lastRestartAt: status?.lastRestartAt ?? "",
    restarts: status?.restarts ?? 0,
    detail,
  };
}
