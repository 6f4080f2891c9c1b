// A child created while its parent's outcome commits, from another replica on the same database:
// the child must not wait forever for a parent that is final already. The child's creation takes
// the parent's row (the update that marks it as having dependents) before it reads the parent's
// status, and the outcome updates that row too, so one of the two commits first and the other
// sees it: either the child is refused (the parent is cancelled) or the outcome's cascade
// cancels it. Both dialects, each with two stores (two replicas) on one database.
import { create } from "@bufbuild/protobuf";
import { afterEach, describe, expect } from "vitest";
import { silentLogger } from "../../../common/log.js";
import { Runtime } from "../../../gen/ep/tower/v1/resources_pb.js";
import * as pb from "../../../gen/ep/tower/v1/work_pb.js";
import { FakeClock } from "../../../test-support/fake-clock.js";
import { storeSuite, T0 } from "../../../test-support/store-suite.js";
import type { Store } from "../../store/store.js";
import type { Caller } from "../caller.js";
import { DEFAULT_LIMITS } from "../deps.js";
import { createEventHub } from "../event-hub.js";
import { createWorkService } from "./work.js";

const admin: Caller = { subject: "tok_0", principal: "root", role: "admin", via: "token" };
const ROUNDS = 60;

storeSuite((s) => {
  const closers: (() => void)[] = [];
  afterEach(() => {
    for (const c of closers.splice(0)) c();
  });

  const replica = (store: Store) => {
    const work = createWorkService({
      store,
      clock: new FakeClock(T0),
      hub: createEventHub(),
      log: silentLogger,
      limits: DEFAULT_LIMITS,
    });
    closers.push(() => work.close());
    return work;
  };

  describe("a child created while its parent is cancelled on another replica", () => {
    s.test(`never waits for the cancelled parent (${ROUNDS} races)`, async () => {
      const a = replica(s.store);
      const b = replica(await s.fx.openAnother());
      const domainId = (await a.createDomain(admin, create(pb.CreateDomainRequestSchema, { name: s.id("d") }))).domain!
        .id;
      const missionId = (await a.createMission(admin, create(pb.CreateMissionRequestSchema, { domainId, title: "m" })))
        .mission!.id;
      const task = (dependsOn: string[] = []) =>
        create(pb.CreateTaskRequestSchema, {
          missionId,
          title: "t",
          runtime: Runtime.SHELL,
          input: { command: "true" },
          dependsOn,
        });
      const outcomes = { refused: 0, cascaded: 0 };
      for (let i = 0; i < ROUNDS; i++) {
        const parent = (await a.createTask(admin, task())).task!.id;
        const [, made] = await Promise.allSettled([
          a.cancelTask(admin, create(pb.CancelTaskRequestSchema, { taskId: parent })),
          b.createTask(admin, task([parent])),
        ]);
        if (made.status === "rejected") {
          expect((made.reason as { code?: string }).code).toBe("parent_failed");
          outcomes.refused++;
          continue;
        }
        const child = await s.store.getTask(made.value.task!.id);
        expect({ round: i, status: child!.status }).toEqual({ round: i, status: "cancelled" });
        expect(child!.result?.error).toBe(`parent ${parent} was cancelled`);
        outcomes.cascaded++;
      }
      expect(outcomes.refused + outcomes.cascaded).toBe(ROUNDS);
    });
  });
});
