// Issue 18: list RPCs page with page_size / page_token / next_page_token (AIP-158), on Connect
// and on REST; page_size 0 (or absent) lists everything as before; a token not made by the
// tower is invalid_argument naming page_token. A real tower.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toEpError } from "../common/errors.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { startTower, type TestTower } from "./harness.js";

let t: TestTower;
let missionId = "";
beforeAll(async () => {
  t = await startTower();
  const work = t.client(WorkService);
  for (let i = 0; i < 7; i++) await work.createDomain({ name: `paged-${i}` });
  const { domain } = await work.createDomain({ name: "with-tasks" });
  missionId = (await work.createMission({ domainId: domain!.id, title: "m" })).mission!.id;
  for (let i = 0; i < 5; i++) await work.createTask({ missionId, title: `t${i}` });
});
afterAll(() => t?.close());

describe("pages", () => {
  it("walks a list a page at a time over Connect, each item once, in the unpaged order", async () => {
    const work = t.client(WorkService);
    const all = (await work.listDomains({})).domains.map((d) => d.name);
    expect(all).toHaveLength(8);
    const seen: string[] = [];
    let token = "";
    let pages = 0;
    do {
      const res = await work.listDomains({ pageSize: 3, pageToken: token });
      expect(res.domains.length).toBeLessThanOrEqual(3);
      seen.push(...res.domains.map((d) => d.name));
      token = res.nextPageToken;
      pages++;
    } while (token);
    expect(pages).toBe(3);
    expect(seen).toEqual(all);
  });

  it("pages tasks with limit as the page size", async () => {
    const work = t.client(WorkService);
    const first = await work.listTasks({ missionId, limit: 2 });
    expect(first.tasks.map((x) => x.title)).toEqual(["t0", "t1"]);
    const second = await work.listTasks({ missionId, limit: 2, pageToken: first.nextPageToken });
    expect(second.tasks.map((x) => x.title)).toEqual(["t2", "t3"]);
    const last = await work.listTasks({ missionId, limit: 2, pageToken: second.nextPageToken });
    expect(last.tasks.map((x) => x.title)).toEqual(["t4"]);
    expect(last.nextPageToken).toBe("");
  });

  it("pages on REST with ?page_size=&page_token=, next_page_token only when there is more", async () => {
    const first = await t.api("GET", "/domains?page_size=5");
    expect(first.body.domains).toHaveLength(5);
    expect(typeof first.body.next_page_token).toBe("string");
    const rest = await t.api("GET", `/domains?page_size=5&page_token=${first.body.next_page_token}`);
    expect(rest.body.domains).toHaveLength(3);
    expect(rest.body).not.toHaveProperty("next_page_token");
    // unpaged, the body is what it always was
    expect(Object.keys((await t.api("GET", "/domains")).body)).toEqual(["domains"]);
    const tasks = await t.api("GET", `/work/missions/${missionId}/tasks?limit=3`);
    const more = await t.api(
      "GET",
      `/work/missions/${missionId}/tasks?limit=3&page_token=${tasks.body.next_page_token}`,
    );
    expect(more.body.tasks.map((x: { title: string }) => x.title)).toEqual(["t3", "t4"]);
  });

  it("refuses a token it did not make and a page size out of range, naming the field", async () => {
    const work = t.client(WorkService);
    const bad = await work.listDomains({ pageToken: "not-a-token" }).catch(toEpError);
    expect(bad).toMatchObject({ code: "invalid_argument", details: { field: "page_token" } });
    const big = await work.listDomains({ pageSize: 5000 }).catch(toEpError);
    expect(big).toMatchObject({ code: "invalid_argument", details: { field: "page_size" } });
    const rest = await t.api("GET", "/domains?page_size=-1");
    expect(rest.status).toBe(400);
    expect(rest.body.error.details).toEqual({ field: "page_size" });
  });
});
