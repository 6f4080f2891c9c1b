// CronService and SuperviseService on mgmt.sock (Connect and JSON-RPC `cron.*`, `supervise.*`
// from one registration), over the fleet's cron dispatcher and watchdog.
import { create } from "@bufbuild/protobuf";
import type { ConnectRouter, ServiceImpl } from "@connectrpc/connect";
import { invalidField } from "../../common/errors.js";
import * as mgmt from "../../gen/ep/daemon/v1/mgmt_pb.js";
import type { CronFire, CronJobView } from "../cron/index.js";
import type { Fleet, ProfileView } from "./fleet.js";

export function cronFireMsg(f: CronFire): mgmt.CronFire {
  return create(mgmt.CronFireSchema, {
    job: f.job,
    slot: f.slot,
    firedAt: f.firedAt,
    status: f.status,
    ...(f.exitCode !== undefined ? { exitCode: f.exitCode } : {}),
    output: f.output ?? "",
    error: f.error ?? "",
  });
}

export function cronJobMsg(j: CronJobView): mgmt.CronJob {
  return create(mgmt.CronJobSchema, {
    name: j.name,
    schedule: j.schedule ?? "",
    session: j.session ?? "",
    prompt: j.prompt,
    dispatch: j.dispatch,
    kind: j.kind,
    interval: j.interval ?? "",
    missed: j.missed,
    nextFireAt: j.nextFireAt ?? "",
    ...(j.lastFire ? { lastFire: cronFireMsg(j.lastFire) } : {}),
  });
}

export function profileMsg(v: ProfileView): mgmt.LocalAgent {
  return create(mgmt.LocalAgentSchema, { ...v });
}

const requireId = (id: string) => {
  if (!id.trim()) throw invalidField("id", "is required (a supervised agent's profile id or tower agent id)");
  return id.trim();
};

export function fleetRoutes(fleet: Fleet): (router: ConnectRouter) => void {
  const supervisedView = async (target: string) => {
    const p = fleet.supervised(requireId(target));
    return profileMsg(await fleet.view(p, fleet.watchdog.status(p.id)));
  };
  return (router) => {
    router.service(mgmt.CronService, {
      list: () =>
        create(mgmt.CronServiceListResponseSchema, {
          jobs: fleet.cron.list().map(cronJobMsg),
          problems: [
            ...fleet.cron.loadErrors().map((e) => ({
              level: "error",
              line: e.line,
              field: e.field ?? "",
              job: e.job ?? "",
              message: e.message,
            })),
            ...fleet.cron.loadWarnings().map((e) => ({
              level: "warning",
              line: e.line,
              field: e.field ?? "",
              job: e.job ?? "",
              message: e.message,
            })),
          ],
        }),
      describe(req) {
        if (!req.name.trim()) throw invalidField("name", "is required");
        return create(mgmt.CronServiceDescribeResponseSchema, {
          job: cronJobMsg(fleet.cron.describe(req.name.trim())),
        });
      },
      history(req) {
        if (!req.name.trim()) throw invalidField("name", "is required");
        if (req.limit < 0) throw invalidField("limit", "must not be negative");
        return create(mgmt.CronServiceHistoryResponseSchema, {
          fires: fleet.cron.history(req.name.trim(), Math.min(req.limit || 20, 100)).map(cronFireMsg),
        });
      },
      reload: () => {
        const res = create(mgmt.CronServiceReloadResponseSchema, { jobs: fleet.cron.reload().jobs });
        fleet.reportState();
        return res;
      },
      gcNow: () => create(mgmt.CronServiceGcNowResponseSchema, { removed: fleet.cron.gcNow() }),
    } satisfies ServiceImpl<typeof mgmt.CronService>);

    router.service(mgmt.SuperviseService, {
      async list() {
        const statuses = fleet.watchdog.list();
        const views = await Promise.all(
          statuses.flatMap((s) => {
            const p = fleet.profiles().find((x) => x.id === s.id);
            return p ? [fleet.view(p, s)] : [];
          }),
        );
        return create(mgmt.SuperviseServiceListResponseSchema, { agents: views.map(profileMsg) });
      },
      async status(req) {
        return create(mgmt.SuperviseServiceStatusResponseSchema, { agent: await supervisedView(req.id) });
      },
      async restart(req) {
        const p = fleet.supervised(requireId(req.id));
        await fleet.watchdog.restart(p.id);
        return create(mgmt.SuperviseServiceRestartResponseSchema, { agent: await supervisedView(p.id) });
      },
      async pause(req) {
        const p = fleet.supervised(requireId(req.id));
        fleet.watchdog.pause(p.id);
        return create(mgmt.SuperviseServicePauseResponseSchema, { agent: await supervisedView(p.id) });
      },
      async resume(req) {
        const p = fleet.supervised(requireId(req.id));
        fleet.watchdog.resume(p.id);
        return create(mgmt.SuperviseServiceResumeResponseSchema, { agent: await supervisedView(p.id) });
      },
    } satisfies ServiceImpl<typeof mgmt.SuperviseService>);
  };
}
