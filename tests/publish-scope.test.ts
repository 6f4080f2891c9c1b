// What a node may publish (issue 35, item 7): events of the domains it serves, naming only their
// missions, tasks and agents, or its own domain-less fleet events. A node registered for domain A
// cannot write into domain B's feed, nor pass a B task off under A's name; epd's publisher drops
// an event the tower refused and keeps sending the rest.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../common/log.js";
import { toEpError } from "../common/errors.js";
import { systemClock } from "../common/clock.js";
import { createEventPublisher } from "../daemon/fleet/events.js";
import { createTowerClients } from "../daemon/link/tower-client.js";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { startTower, waitFor, type TestTower } from "./harness.js";

let t: TestTower;
let domainA: string;
let domainB: string;
let taskB: string;
let nodeToken: string;

beforeAll(async () => {
  t = await startTower();
  const work = t.client(WorkService);
  domainA = (await work.createDomain({ name: "scope-a" })).domain!.id;
  domainB = (await work.createDomain({ name: "scope-b" })).domain!.id;
  const missionB = (await work.createMission({ domainId: domainB, title: "b" })).mission!.id;
  taskB = (
    await work.createTask({ missionId: missionB, title: "b", runtime: Runtime.SHELL, input: { command: "true" } })
  ).task!.id;
  nodeToken = (await t.client(NodeService).registerNode({ hostname: "scope-a", domainIds: [domainA] })).token;
  await t.client(AgentService, nodeToken).enrollAgent({ domainId: domainA, runtime: Runtime.SHELL, name: "a0" });
});

afterAll(async () => {
  await t?.close();
});

const publish = (events: Record<string, unknown>[]) =>
  t.client(NodeService, nodeToken).publishEvents({ events: events as never });
const refusal = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (err: unknown) => toEpError(err),
  );
/** The names of the events stored in a domain (as the admin sees them). */
const namesIn = async (domainId: string) =>
  (await t.client(EventService).listEvents({ filter: { domainId } })).events.map((e) => e.name);

describe("PublishEvents by a node registered for domain A", () => {
  it("refuses an event stamped with a domain the node does not serve, and stores nothing of the call", async () => {
    const err = await refusal(
      publish([
        { type: "matrix", name: "ok.first", domainId: domainA },
        { type: "matrix", name: "task.succeeded", domainId: domainB, taskId: taskB },
      ]),
    );
    expect(err?.code).toBe("forbidden");
    expect(err?.message).toContain(`this node serves only ${domainA}, not ${domainB}`);
    expect(await namesIn(domainB)).not.toContain("task.succeeded");
    expect(await namesIn(domainA)).not.toContain("ok.first");
  });

  it("refuses an event of its own domain naming a task of another", async () => {
    const err = await refusal(publish([{ type: "matrix", name: "task.succeeded", domainId: domainA, taskId: taskB }]));
    expect(err?.code).toBe("forbidden");
    expect(err?.message).toContain(`names task ${taskB}, which is not in domain ${domainA}`);
  });

  it("takes its own fleet events without a domain, and refuses other names or named work without one", async () => {
    const ok = await publish([{ type: "matrix", name: "cron.fired", status: "ok", payload: { job: "nightly" } }]);
    expect(ok.ids).toHaveLength(1);
    const [stored] = (await t.client(EventService).listEvents({ filter: { types: ["matrix"] } })).events.filter(
      (e) => e.id === ok.ids[0],
    );
    expect(stored.payload?.node_id).toBeTruthy();

    const named = await refusal(publish([{ type: "matrix", name: "task.succeeded", status: "succeeded" }]));
    expect(named?.code).toBe("forbidden");
    expect(named?.message).toContain("has no domain: a node publishes without one only its own events");
    const work = await refusal(publish([{ type: "matrix", name: "agent.stopped", taskId: taskB }]));
    expect(work?.code).toBe("forbidden");
    expect(work?.message).toContain("names a task but no domain");
  });

  it("takes events of its domain", async () => {
    await publish([{ type: "inbox", name: "agent.signal", domainId: domainA }]);
    expect(await namesIn(domainA)).toContain("agent.signal");
  });
});

describe("epd's event publisher", () => {
  it("drops an event the tower refused and sends the ones around it", async () => {
    const tower = createTowerClients(t.url, nodeToken);
    const events = createEventPublisher({ tower, clock: systemClock, log: silentLogger, retryMs: 60_000 });
    events.publish({ type: "matrix", name: "pub.before", domainId: domainA, payload: {} });
    events.publish({ type: "matrix", name: "pub.foreign", domainId: domainB, payload: {} });
    events.publish({ type: "matrix", name: "pub.after", domainId: domainA, payload: {} });
    await events.flush();
    events.publish({ type: "matrix", name: "pub.later", domainId: domainA, payload: {} });
    await waitFor(async () => (await namesIn(domainA)).includes("pub.later"), 5_000);
    const a = await namesIn(domainA);
    expect(a).toEqual(expect.arrayContaining(["pub.before", "pub.after", "pub.later"]));
    expect(await namesIn(domainB)).not.toContain("pub.foreign");
    await events.close();
  });
});
