// Outcomes committed in batches, and a tower killed -9 in the middle of them (issue 37): one real
// epd with eight shell agents drains short tasks over its session, so outcomes go up together and
// the tower commits those it reads together in one transaction; the SQLite tower is killed -9
// while outcomes are on the wire, on both dialects of the question "was it committed?": some were
// (their ack was lost with the tower), some were not. After the restart: no task lost (all
// succeeded), none run twice (the marker holds each id once), none claimed twice (attempts = 1),
// and epd did have outcomes unacknowledged at the kill (its log says it retried them), so the
// kill was mid-batch and not between two. epd's own claim (the recovery path while the link is
// down) polls every 50 ms here, so its claims meet the reopened link at every kill: a claim in
// flight as the link opened once made the tower give its task back as lost (eight tasks ran twice).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { Runtime, TaskStatus, type Task } from "../gen/ep/tower/v1/resources_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { adminClient, buildBinaries, registerNode, spawnEpd, spawnTowerProcess } from "./epd-harness.js";
import { tempHome, useCleanups, waitFor } from "./harness.js";

const cleanup = useCleanups();
const TASKS = 400;
const AGENTS = 8;

beforeAll(async () => {
  await buildBinaries();
}, 120_000);

describe("batched outcomes across a tower kill -9", () => {
  it("a tower killed while outcomes are on the session: none lost, none run twice, none claimed twice", async () => {
    const h = tempHome("ep-batch-crash-");
    cleanup(() => h.cleanup());
    const towerHome = join(h.dir, "tower");
    let tower = await spawnTowerProcess(towerHome);
    cleanup(() => tower.kill9());
    const port = tower.port;
    let work = adminClient(tower, WorkService);
    const domainId = (await work.createDomain({ name: "batch-crash" })).domain!.id;
    const missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;
    const nodeFile = join(h.dir, "node.json");
    await registerNode(tower.url, tower.adminToken, nodeFile);
    const epd = await spawnEpd({
      home: join(h.dir, "node"),
      nodeFile,
      backendUrl: tower.url,
      env: { EP_POLL_MS: "50" },
    });
    cleanup(() => epd.stop());
    for (let i = 0; i < AGENTS; i++) await epd.call("agent.enroll", { domainId, runtime: "shell", name: `sh${i}` });
    await waitFor(() => epd.logs.some((l) => l.msg === "link connected"), 15_000);

    const marker = join(h.dir, "ran.txt");
    const command = `printf '%s\\n' "$EP_TASK_ID" >> '${marker}'`;
    const ids: string[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (ids.length < TASKS)
          ids.push(
            (await work.createTask({ missionId, title: `b${ids.length}`, runtime: Runtime.SHELL, input: { command } }))
              .task!.id,
          );
      }),
    );
    // the kill: once a quarter of the tasks ran, while the agents are still draining; again at
    // the next quarters if no outcome happened to be on the wire (up to three kills)
    const ran = () => readFileSync(marker, "utf8").split("\n").filter(Boolean);
    const retried = () =>
      epd.logs.filter((l) => l.msg === "outcome not acknowledged; retrying").map((l) => l.task_id as string);
    let atKill = 0;
    for (let k = 1; k <= 3 && retried().length === 0; k++) {
      await waitFor(() => ran().length >= (k * TASKS) / 4, 60_000, 2);
      await tower.kill9();
      atKill = ran().length;
      tower = await spawnTowerProcess(towerHome, {}, port);
      work = adminClient(tower, WorkService);
      await waitFor(
        () => epd.logs.filter((l) => l.msg === "link connected").length > k || retried().length > 0,
        30_000,
      );
    }

    const all = async (): Promise<Task[]> => (await work.listTasks({ missionId, limit: 1000 })).tasks;
    await waitFor(async () => (await all()).every((t) => t.status === TaskStatus.SUCCEEDED), 90_000, 100);
    const tasks = await all();
    const runs = new Map<string, number>();
    for (const id of ran()) runs.set(id, (runs.get(id) ?? 0) + 1);
    expect(atKill, "the kill came while tasks were still being drained").toBeLessThan(TASKS);
    expect(tasks.map((t) => t.id).sort(), "every task created is listed").toEqual([...ids].sort());
    expect(
      [...runs].filter(([, n]) => n > 1).map(([id, n]) => `${id}: ${n} runs`),
      "tasks whose command ran more than once",
    ).toEqual([]);
    expect(
      tasks.filter((t) => !runs.has(t.id)).map((t) => t.id),
      "succeeded tasks whose command never ran",
    ).toEqual([]);
    expect(
      tasks.filter((t) => t.attempts !== 1).map((t) => `${t.id}: attempts ${t.attempts}`),
      "tasks claimed more than once",
    ).toEqual([]);
    // outcomes were on the session, unanswered, when the tower died: they went up again after it
    expect(retried().length, "outcomes unacknowledged at a kill").toBeGreaterThan(0);
    // each of them is counted once, whether its first commit made it or not
    for (const id of new Set(retried())) expect(runs.get(id), `runs of ${id}, whose outcome was retried`).toBe(1);
  }, 180_000);
});
