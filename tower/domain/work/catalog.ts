// The work catalog: domains and missions as records. Tasks are work/tasks.ts, the claim loop
// over them work/claims.ts.
import { create } from "@bufbuild/protobuf";
import { EpError } from "../../../common/errors.js";
import { newId } from "../../../common/ids.js";
import * as pb from "../../../gen/ep/tower/v1/work_pb.js";
import { authorize, scopeDomains, type Caller } from "../caller.js";
import { domainMsg, missionMsg, usageMsg } from "../convert.js";
import { createIdempotency } from "../idempotency.js";
import { MAX_TEXT, text, usageByAgent, sumUsage } from "./support.js";
import type { WorkContext } from "./context.js";
import { paginate } from "../paging.js";

export function createWorkCatalog(ctx: WorkContext) {
  const { deps, store, clock, now, mustDomain, mustMission } = ctx;
  const idempotent = createIdempotency(deps);
  return {
    // ---- domains

    async createDomain(caller: Caller, req: pb.CreateDomainRequest): Promise<pb.CreateDomainResponse> {
      authorize(caller, "operate");
      if (caller.role === "agent") throw new EpError("forbidden", "agents cannot create domains");
      const name = text("name", req.name, { required: true, max: 200 });
      const call = {
        caller,
        method: "WorkService.CreateDomain",
        input: pb.CreateDomainRequestSchema,
        request: req,
        output: pb.CreateDomainResponseSchema,
      };
      return idempotent(call, async (tx, emit) => {
        if (await tx.getDomainByName(name))
          throw new EpError("already_exists", `a domain named ${JSON.stringify(name)} exists already`);
        const row = { id: newId("dom", clock.now()), name, createdAt: now() };
        await tx.insertDomain(row);
        emit({ type: "matrix", name: "domain.created", domainId: row.id, payload: { domain_id: row.id, name } });
        return create(pb.CreateDomainResponseSchema, { domain: domainMsg(row) });
      });
    },

    async listDomains(caller: Caller, req: pb.ListDomainsRequest): Promise<pb.ListDomainsResponse> {
      authorize(caller, "read");
      const rows = await store.listDomains();
      const scope = scopeDomains(caller);
      const { page, nextPageToken } = paginate(
        scope ? rows.filter((d) => scope.includes(d.id)) : rows,
        (d) => d.id,
        req,
      );
      return create(pb.ListDomainsResponseSchema, { domains: page.map(domainMsg), nextPageToken });
    },

    async getDomain(caller: Caller, req: pb.GetDomainRequest): Promise<pb.GetDomainResponse> {
      const d = await mustDomain(store, req.domainId);
      authorize(caller, "read", { domainId: d.id });
      return create(pb.GetDomainResponseSchema, { domain: domainMsg(d) });
    },

    // ---- missions

    async createMission(caller: Caller, req: pb.CreateMissionRequest): Promise<pb.CreateMissionResponse> {
      const title = text("title", req.title, { required: true });
      const description = text("description", req.description, { max: MAX_TEXT });
      const call = {
        caller,
        method: "WorkService.CreateMission",
        input: pb.CreateMissionRequestSchema,
        request: req,
        output: pb.CreateMissionResponseSchema,
      };
      return idempotent(call, async (tx, emit) => {
        const d = await mustDomain(tx, req.domainId);
        authorize(caller, "operate", { domainId: d.id });
        const ts = now();
        const row = {
          id: newId("msn", clock.now()),
          domainId: d.id,
          title,
          description,
          status: "open",
          createdAt: ts,
          updatedAt: ts,
        };
        await tx.insertMission(row);
        emit({
          type: "matrix",
          name: "mission.created",
          domainId: d.id,
          missionId: row.id,
          status: "open",
          payload: { mission_id: row.id, title },
        });
        return create(pb.CreateMissionResponseSchema, { mission: missionMsg(row) });
      });
    },

    async listMissions(caller: Caller, req: pb.ListMissionsRequest): Promise<pb.ListMissionsResponse> {
      if (req.domainId) await mustDomain(store, req.domainId);
      const scope = scopeDomains(caller);
      if (req.domainId) authorize(caller, "read", { domainId: req.domainId });
      else authorize(caller, "read");
      const rows = await store.listMissions(req.domainId || (scope?.length === 1 ? scope[0] : undefined));
      const { page, nextPageToken } = paginate(
        rows.filter((m) => !scope || scope.includes(m.domainId)),
        (m) => m.id,
        req,
      );
      return create(pb.ListMissionsResponseSchema, { missions: page.map(missionMsg), nextPageToken });
    },

    async getMission(caller: Caller, req: pb.GetMissionRequest): Promise<pb.GetMissionResponse> {
      const m = await mustMission(store, req.missionId);
      authorize(caller, "read", { domainId: m.domainId });
      // what the mission's runs cost so far, as their runtimes reported it
      const tasks = await store.listTasks({ missionId: m.id, limit: 100_000 });
      const usage = sumUsage(tasks);
      const usageByAgentMsg = usageByAgent(tasks).map((a) => ({ agentId: a.agentId, usage: usageMsg(a.usage) }));
      return create(pb.GetMissionResponseSchema, {
        mission: missionMsg(m),
        usage: usage && usageMsg(usage),
        usageByAgent: usageByAgentMsg,
      });
    },
  };
}
