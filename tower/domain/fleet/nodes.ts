// The fleet's nodes: registration (a signed node token), the domains a node serves, what nodes
// may see of each other, the events and state reports they publish, and config reloads the
// tower asks of them over their link.
import { randomBytes } from "node:crypto";
import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { timestampOf } from "../../../common/vocab.js";
import { restJson } from "../../../common/rest-json.js";
import { iso } from "../../../common/clock.js";
import { EpError, invalidField } from "../../../common/errors.js";
import { newId } from "../../../common/ids.js";
import * as fleet from "../../../gen/ep/tower/v1/fleet_pb.js";
import type { NewEvent, Store } from "../../store/store.js";
import { authorize, scopeDomains, type Caller } from "../caller.js";
import { nodeMsg } from "../convert.js";
import { commit } from "../event-hub.js";
import type { FleetContext } from "./context.js";
import type { Deps } from "../deps.js";
import { askNode, type Deliver } from "../node-ask.js";
import { paginate } from "../paging.js";
import { durationMs } from "@bufbuild/protobuf/wkt";

const HOSTNAME = /^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$/;
/** Bounds of one node state report (ReportNodeState). */
const MAX_REPORTED = 1000;
const MAX_REPORTED_TEXT = 4000;
/** ReloadNodeConfig waits this long for the node's config.reload event unless told otherwise. */
const RELOAD_WAIT_MS = 10_000;

/** A reported message as the tools show it: snake_case JSON, long strings cut. */
function reportedJson<D extends DescMessage>(schema: D, msg: MessageShape<D>): Record<string, unknown> {
  const j = restJson(schema, msg);
  for (const [k, v] of Object.entries(j))
    if (typeof v === "string" && v.length > MAX_REPORTED_TEXT) j[k] = `${v.slice(0, MAX_REPORTED_TEXT)}…`;
  return j;
}

/** The `errors` of a config.reload event payload as NodeConfigError messages. */
function configErrors(v: unknown): fleet.NodeConfigError[] {
  if (!Array.isArray(v)) return [];
  return v
    .filter((e): e is Record<string, unknown> => e !== null && typeof e === "object")
    .map((e) =>
      create(fleet.NodeConfigErrorSchema, {
        file: String(e.file ?? ""),
        line: Number.isInteger(e.line) ? (e.line as number) : 0,
        field: String(e.field ?? ""),
        item: String(e.item ?? ""),
        message: String(e.message ?? ""),
      }),
    );
}

export function createNodeOps({ deps, auth, opts, linkHub }: FleetContext) {
  const { store, clock } = deps;
  const { deliver } = linkHub;
  const visibleNodeIds = (caller: Caller) => visibleNodeIdsIn(store, caller);

  return {
    visibleNodeIds,

    async registerNode(caller: Caller, req: fleet.RegisterNodeRequest): Promise<fleet.RegisterNodeResponse> {
      authorize(caller, "admin");
      const hostname = req.hostname.trim();
      if (!HOSTNAME.test(hostname))
        throw invalidField("hostname", "must be a host name (letters, digits, dots, dashes)");
      const ts = iso(clock.now());
      const domains = await servedDomains(store, req.domainIds, "domain_ids");
      const row = {
        id: newId("nod", clock.now()),
        hostname,
        status: "registered",
        lastSeenAt: "",
        createdAt: ts,
        domains,
      };
      await commit(deps, async (tx, emit) => {
        await tx.insertNode(row);
        emit({
          type: "matrix",
          name: "node.registered",
          status: "registered",
          payload: { node_id: row.id, hostname, domains },
        });
      });
      const token = await auth.signNodeToken(row.id, hostname);
      return create(fleet.RegisterNodeResponseSchema, { node: nodeMsg(row), token, towerUrl: opts.towerUrl });
    },

    async listNodes(caller: Caller, req: fleet.ListNodesRequest): Promise<fleet.ListNodesResponse> {
      authorize(caller, "read");
      const visible = await visibleNodeIds(caller);
      const rows = (await store.listNodes()).filter((n) => !visible || visible.has(n.id));
      const { page, nextPageToken } = paginate(rows, (n) => n.id, req);
      return create(fleet.ListNodesResponseSchema, { nodes: page.map(nodeMsg), nextPageToken });
    },

    async getNode(caller: Caller, req: fleet.GetNodeRequest): Promise<fleet.GetNodeResponse> {
      authorize(caller, "read");
      const n = await store.getNode(req.nodeId);
      const visible = await visibleNodeIds(caller);
      if (!n || (visible && !visible.has(n.id)))
        throw new EpError("node_not_found", `node ${req.nodeId} does not exist`);
      return create(fleet.GetNodeResponseSchema, { node: nodeMsg(n) });
    },

    async setNodeDomains(caller: Caller, req: fleet.SetNodeDomainsRequest): Promise<fleet.SetNodeDomainsResponse> {
      authorize(caller, "admin");
      if (!req.nodeId) throw invalidField("node_id", "is required");
      if (req.all && req.domainIds.length) throw invalidField("domain_ids", "give the domains or all = true, not both");
      if (!req.all && !req.domainIds.length)
        throw invalidField("domain_ids", "name at least one domain, or give all = true");
      const domains = req.all ? ["*"] : await servedDomains(store, req.domainIds, "domain_ids");
      return commit(deps, async (tx, emit) => {
        const before = await tx.getNode(req.nodeId);
        if (!before) throw new EpError("node_not_found", `node ${req.nodeId} does not exist`, { field: "node_id" });
        const node = (await tx.updateNode(req.nodeId, { domains }))!;
        emit({
          type: "matrix",
          name: "node.domains_set",
          payload: { node_id: node.id, from: before.domains, to: domains, by: caller.subject },
        });
        return create(fleet.SetNodeDomainsResponseSchema, { node: nodeMsg(node) });
      });
    },

    async publishEvents(caller: Caller, req: fleet.PublishEventsRequest): Promise<fleet.PublishEventsResponse> {
      authorize(caller, "node");
      if (req.events.length > 500) throw invalidField("events", "at most 500 events per call");
      req.events.forEach((e, i) => {
        if (!["inbox", "matrix", "progress"].includes(e.type))
          throw invalidField(`events[${i}].type`, "must be inbox, matrix or progress");
        if (!e.name) throw invalidField(`events[${i}].name`, "is required");
      });
      await checkEventScope(store, caller, req.events);
      const events: NewEvent[] = req.events.map((e) => ({
        type: e.type as NewEvent["type"],
        name: e.name,
        domainId: e.domainId,
        missionId: e.missionId,
        agentId: e.agentId,
        taskId: e.taskId,
        status: e.status,
        payload: { ...(e.payload ?? {}), node_id: caller.nodeId },
      }));
      const written = await store.transaction((tx) => tx.appendEvents(events, iso(clock.now())));
      deps.hub.publish(written);
      return create(fleet.PublishEventsResponseSchema, { ids: written.map((e) => BigInt(e.id)) });
    },

    /** The node's cron jobs and supervised agents; the latest report per node is kept (node_state). */
    async reportNodeState(caller: Caller, req: fleet.ReportNodeStateRequest): Promise<fleet.ReportNodeStateResponse> {
      authorize(caller, "node");
      checkNodeReport(req);
      const reportedAt = iso(clock.now());
      await store.putNodeState({
        nodeId: caller.nodeId!,
        cronJobs: req.cronJobs.map((j) => reportedJson(fleet.NodeCronJobSchema, j)),
        supervised: req.supervised.map((a) => reportedJson(fleet.NodeSupervisedAgentSchema, a)),
        configErrors: req.configErrors.map((e) => reportedJson(fleet.NodeConfigErrorSchema, e)),
        reportedAt,
      });
      return create(fleet.ReportNodeStateResponseSchema, { reportedAt: timestampOf(reportedAt) });
    },

    /**
     * Sends `config_reload` to the node (through the replica holding its link) and waits up to
     * `wait` for the node's `config.reload` event naming this request.
     */
    async reloadNodeConfig(
      caller: Caller,
      req: fleet.ReloadNodeConfigRequest,
    ): Promise<fleet.ReloadNodeConfigResponse> {
      authorize(caller, "admin");
      if (!req.nodeId) throw invalidField("node_id", "is required");
      const waitMs = req.wait ? durationMs(req.wait) : RELOAD_WAIT_MS;
      if (!(waitMs >= 0 && waitMs <= 60_000)) throw invalidField("wait", "must be between 0 and 60 s");
      if (!(await store.getNode(req.nodeId)))
        throw new EpError("node_not_found", `node ${req.nodeId} does not exist`, { field: "node_id" });
      return reloadAndWait(deps, deliver, caller, req.nodeId, waitMs);
    },
  };
}

/** Where a node's own events (those without a domain) are named: the fleet it runs, never the work. */
const NODE_EVENT_PREFIXES = ["agent.", "supervise.", "cron.", "config.", "booster."];

/**
 * What a node may publish: events of a domain it serves, naming only that domain's missions,
 * tasks and agents; or its own events (no domain: its profile agents, cron, supervision, config
 * reloads, booster verdicts), named under NODE_EVENT_PREFIXES and naming no mission, task or
 * agent. Anything else is refused whole (`forbidden`), so a node cannot write into the feed of a
 * domain it does not serve (docs/security.md, "Node scope").
 */
async function checkEventScope(
  store: Store,
  caller: Caller,
  events: fleet.PublishEventsRequest["events"],
): Promise<void> {
  const domainOf = new Map<string, Promise<string | undefined>>();
  const lookup = (kind: "mission" | "task" | "agent", id: string) => {
    const key = `${kind}:${id}`;
    let found = domainOf.get(key);
    if (!found) {
      const row = kind === "mission" ? store.getMission(id) : kind === "task" ? store.getTask(id) : store.getAgent(id);
      found = row.then((r) => r?.domainId);
      domainOf.set(key, found);
    }
    return found;
  };
  for (const [i, e] of events.entries()) {
    const named = { mission: e.missionId, task: e.taskId, agent: e.agentId };
    if (!e.domainId) {
      if (!NODE_EVENT_PREFIXES.some((p) => e.name.startsWith(p))) {
        throw new EpError(
          "forbidden",
          `events[${i}] (${e.name}) has no domain: a node publishes without one only its own events ` +
            `(${NODE_EVENT_PREFIXES.map((p) => `${p}*`).join(", ")}); give the domain it is about`,
          { field: `events[${i}].domain_id` },
        );
      }
      const which = Object.entries(named).find(([, id]) => id)?.[0];
      if (which)
        throw new EpError(
          "forbidden",
          `events[${i}] (${e.name}) names a ${which} but no domain; give the ${which}'s domain`,
          { field: `events[${i}].domain_id` },
        );
      continue;
    }
    authorize(caller, "node", { domainId: e.domainId });
    for (const [kind, id] of Object.entries(named) as ["mission" | "task" | "agent", string][]) {
      if (id && (await lookup(kind, id)) !== e.domainId) {
        throw new EpError(
          "forbidden",
          `events[${i}] (${e.name}) names ${kind} ${id}, which is not in domain ${e.domainId}`,
          { field: `events[${i}].${kind}_id` },
        );
      }
    }
  }
}

/** Sends config_reload to the node and waits up to waitMs for its config.reload event naming this request. */
async function reloadAndWait(
  deps: Deps,
  deliver: Deliver,
  caller: Caller,
  nodeId: string,
  waitMs: number,
): Promise<fleet.ReloadNodeConfigResponse> {
  const requestId = `rld_${randomBytes(8).toString("hex")}`;
  const e = await askNode(deps, deliver, {
    nodeId,
    msg: { command: { case: "configReload", value: { requestId } } },
    answers: (x) => x.type === "matrix" && x.name === "config.reload" && x.payload.request_id === requestId,
    waitMs,
    undone: "its configuration was not reloaded",
    sent: () =>
      commit(deps, async (_tx, emit) =>
        emit({
          type: "matrix",
          name: "node.config_reload_requested",
          payload: { node_id: nodeId, request_id: requestId, by: caller.subject },
        }),
      ),
  });
  if (!e) return create(fleet.ReloadNodeConfigResponseSchema, { requestId, status: fleet.ReloadStatus.SENT });
  return create(fleet.ReloadNodeConfigResponseSchema, {
    requestId,
    status: e.status === "ok" ? fleet.ReloadStatus.OK : fleet.ReloadStatus.FAILED,
    errors: configErrors(e.payload.errors),
    results: Array.isArray(e.payload.results) ? e.payload.results.map(String) : [],
    eventId: BigInt(e.id),
  });
}

/** The bounds of one node state report: counts, and the names its entries need. */
function checkNodeReport(req: fleet.ReportNodeStateRequest): void {
  for (const [field, n] of [
    ["cron_jobs", req.cronJobs.length],
    ["supervised", req.supervised.length],
    ["config_errors", req.configErrors.length],
  ] as const) {
    if (n > MAX_REPORTED) throw invalidField(field, `at most ${MAX_REPORTED} per report`);
  }
  req.cronJobs.forEach((j, i) => {
    if (!j.name) throw invalidField(`cron_jobs[${i}].name`, "is required");
  });
  req.supervised.forEach((a, i) => {
    if (!a.profile) throw invalidField(`supervised[${i}].profile`, "is required");
  });
}

/** Domain ids a node is to serve, checked; none given: all ("*"). */
async function servedDomains(store: Store, ids: readonly string[], field: string): Promise<string[]> {
  if (!ids.length) return ["*"];
  const out: string[] = [];
  for (const [i, id] of ids.entries()) {
    if (id === "*") return ["*"];
    if (!(await store.getDomain(id)))
      throw new EpError("domain_not_found", `domain ${id} does not exist`, { field: `${field}[${i}]` });
    if (!out.includes(id)) out.push(id);
  }
  return out;
}

/**
 * The nodes a caller may see, or undefined for all: an agent token sees the nodes that carry
 * agents of its domain; a node serving some domains sees itself and the nodes with agents there.
 */
async function visibleNodeIdsIn(store: Store, caller: Caller): Promise<Set<string> | undefined> {
  const scope = scopeDomains(caller);
  if (!scope) return undefined;
  const ids = new Set<string>(caller.nodeId ? [caller.nodeId] : []);
  for (const d of scope) for (const a of await store.listAgents({ domainId: d })) if (a.nodeId) ids.add(a.nodeId);
  return ids;
}
