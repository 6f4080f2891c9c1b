// The management services mgmt.sock serves (Connect and JSON-RPC from one registration):
// DaemonService, AgentService and ToolService. Cron and supervision register their own.
import { create, fromJson, type JsonObject } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter, ServiceImpl } from "@connectrpc/connect";
import { iso } from "../../common/clock.js";
import { EpError, invalidField, toEpError } from "../../common/errors.js";
import type { NodeIdentity } from "../../common/node-identity.js";
import * as mgmt from "../../gen/ep/daemon/v1/mgmt_pb.js";
import { enumOf, enumWord, isoOf } from "../../common/vocab.js";
import { RuntimeSchema, type Runtime } from "../../gen/ep/tower/v1/resources_pb.js";
import type { TowerLink } from "../link/tower-link.js";
import type { TowerClients } from "../link/tower-client.js";
import { isRuntimeKind, RUNTIME_KINDS } from "../runtimes/runtime.js";
import type { AgentStore, LocalAgentRecord } from "../worker/agent-store.js";
import type { SignalRunner } from "../worker/signal-runner.js";
import type { TaskWorker } from "../worker/worker.js";
import type { Fleet } from "../fleet/index.js";
import type { ToolCaller } from "../mcp/tool-call.js";

export interface MgmtServicesDeps {
  identity: NodeIdentity;
  tower: TowerClients;
  agents: AgentStore;
  worker: TaskWorker;
  link: TowerLink;
  signals: SignalRunner;
  /** Profile agents: listed with the enrolled ones; signals go through the fleet's one signal path. */
  fleet?: Pick<Fleet, "signal" | "views" | "towerAgentId">;
  tools: Pick<ToolCaller, "call">;
  version: string;
  startedAt: number;
  booster: string;
  /** each runtime's executable, version and usability on the runs' PATH (DaemonService.Runtimes) */
  runtimes?: () => Promise<
    { kind: string; command: string; path: string; version: string; usable: boolean; detail: string }[]
  >;
}

export function localAgentMsg(a: LocalAgentRecord, worker: TaskWorker): mgmt.LocalAgent {
  const running = worker.running().find((r) => r.agentId === a.id);
  const activity = worker.activity(a.id);
  return create(mgmt.LocalAgentSchema, {
    id: a.id,
    domainId: a.domainId,
    name: a.name,
    runtime: a.runtime,
    capabilities: a.capabilities,
    state: activity === "busy" ? "busy" : "idle",
    pid: running?.pid ?? 0,
    detail: running ? `running task ${running.taskId}` : "",
  });
}

export function mgmtRoutes(d: MgmtServicesDeps): (router: ConnectRouter) => void {
  /** agent.enroll: the agent enrolled at the tower for this node, then recorded in agents.json. */
  async function enrollHere(req: mgmt.AgentServiceEnrollRequest): Promise<mgmt.AgentServiceEnrollResponse> {
    let agent;
    try {
      agent = (
        await d.tower.agents.enrollAgent({
          domainId: req.domainId.trim(),
          runtime: enumOf<Runtime>(RuntimeSchema, req.runtime, "runtime"),
          capabilities: req.capabilities,
          name: req.name,
        })
      ).agent;
    } catch (err) {
      throw toEpError(err);
    }
    if (!agent) throw new EpError("internal", "the tower answered an enrollment without the agent");
    const record: LocalAgentRecord = {
      id: agent.id,
      domainId: agent.domainId,
      name: agent.name,
      runtime: enumWord(RuntimeSchema, agent.runtime),
      capabilities: agent.capabilities,
      enrolledAt: isoOf(agent.createdAt),
    };
    await d.agents.add(record);
    // the tower hands it work once it sees the enrollment (agent.enrolled)
    return create(mgmt.AgentServiceEnrollResponseSchema, { agent: localAgentMsg(record, d.worker) });
  }
  return (router) => {
    router.service(mgmt.DaemonService, {
      status() {
        return create(mgmt.DaemonServiceStatusResponseSchema, {
          nodeId: d.identity.node_id,
          hostname: d.identity.hostname,
          backendUrl: d.tower.baseUrl,
          link: d.link.state(),
          version: d.version,
          startedAt: iso(d.startedAt),
          runningTasks: d.worker.running().length,
          agents: d.agents.list().map((a) => localAgentMsg(a, d.worker)),
          booster: d.booster,
          takeTasks: true, // work arrives over the link (the one way); the field stays for old clients
        });
      },
      async runtimes() {
        return create(mgmt.DaemonServiceRuntimesResponseSchema, { runtimes: (await d.runtimes?.()) ?? [] });
      },
    } satisfies ServiceImpl<typeof mgmt.DaemonService>);

    router.service(mgmt.AgentService, {
      async enroll(req) {
        if (!req.domainId.trim()) throw invalidField("domain_id", "is required");
        if (!isRuntimeKind(req.runtime))
          throw invalidField(
            "runtime",
            `must be one of ${RUNTIME_KINDS.join(", ")} (got ${JSON.stringify(req.runtime)})`,
          );
        // a task the tower hands the agent before its answer is read here waits for this (AgentStore.enrolled)
        return d.agents.enrolling(enrollHere(req));
      },
      async list() {
        // a profile agent also claims its tower agent's work: say which task it runs
        const runs = d.worker.running();
        const profiles = d.fleet
          ? (await d.fleet.views()).map((v) => {
              const towerId = d.fleet!.towerAgentId(v.id);
              const run = towerId ? runs.find((r) => r.agentId === towerId) : undefined;
              return create(
                mgmt.LocalAgentSchema,
                run ? { ...v, detail: [v.detail, `running task ${run.taskId}`].filter(Boolean).join("; ") } : v,
              );
            })
          : [];
        return create(mgmt.AgentServiceListResponseSchema, {
          agents: [...d.agents.list().map((a) => localAgentMsg(a, d.worker)), ...profiles],
        });
      },
      async signal(req) {
        if (!req.target.trim()) throw invalidField("target", "is required");
        if (!req.prompt.trim()) throw invalidField("prompt", "is required");
        if (d.fleet)
          return create(mgmt.AgentServiceSignalResponseSchema, {
            deliveredVia: await d.fleet.signal(req.target.trim(), req.prompt),
          });
        const agent = d.agents.find(req.target.trim());
        if (!agent)
          throw new EpError("agent_not_found", `no agent or profile named ${req.target} on this node`, {
            target: req.target,
          });
        const deliveredVia = d.signals.deliver(agent, req.prompt);
        // the inbox event records the delivery (best effort: the run happens either way)
        await d.tower.nodes
          .publishEvents({
            events: [
              {
                type: "inbox",
                name: "agent.signal",
                domainId: agent.domainId,
                agentId: agent.id,
                payload: { agent_id: agent.id, prompt: req.prompt, via: deliveredVia },
              },
            ],
          })
          .catch(() => undefined);
        return create(mgmt.AgentServiceSignalResponseSchema, { deliveredVia });
      },
    } satisfies ServiceImpl<typeof mgmt.AgentService>);

    router.service(mgmt.ToolService, {
      async run(req) {
        const out = await d.tools.call(req.tool.trim(), (req.arguments ?? {}) as JsonObject, {
          domainId: req.domainId.trim() || undefined,
        });
        return create(mgmt.ToolServiceRunResponseSchema, {
          result: fromJson(ValueSchema, out.result),
          shortCircuited: out.shortCircuited,
        });
      },
    } satisfies ServiceImpl<typeof mgmt.ToolService>);
  };
}
