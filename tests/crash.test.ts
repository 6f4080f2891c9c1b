// kill -9 of the tower while tasks are being submitted loses no acknowledged task and
// leaves the database consistent on restart.
import Database from "better-sqlite3";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { spawnTower, tempHome, waitFor } from "./harness.js";

const home = tempHome("ep-crash-");
afterAll(() => home.cleanup());

describe("crash safety", () => {
  it("keeps every acknowledged task across kill -9 mid-write", async () => {
    let tower = await spawnTower(home.dir);
    const auth = { authorization: `Bearer ${tower.adminToken}`, "content-type": "application/json" };
    const post = (path: string, body: unknown) =>
      fetch(tower.url + path, { method: "POST", headers: auth, body: JSON.stringify(body) });
    const domain = (await (await post("/domains", { name: "crash" })).json()) as { domain: { id: string } };
    const mission = (await (await post(`/domains/${domain.domain.id}/m`, { title: "m" })).json()) as {
      mission: { id: string };
    };

    const acked = new Set<string>();
    let stop = false;
    const writers = Array.from({ length: 8 }, async (_, w) => {
      for (let i = 0; !stop; i++) {
        try {
          const res = await post(`/work/missions/${mission.mission.id}/tasks`, {
            title: `w${w}-${i}`,
            input: { n: i },
          });
          if (res.status === 201) acked.add(((await res.json()) as { task: { id: string } }).task.id);
        } catch {
          return; // the tower is gone
        }
      }
    });
    // kill it mid-stream once a fair number are acknowledged (a fixed sleep got few on a loaded machine)
    await waitFor(() => acked.size > 100, 20_000);
    const exited = new Promise((r) => tower.child.once("exit", r));
    tower.child.kill("SIGKILL");
    stop = true;
    await Promise.all(writers);
    await exited;
    expect(acked.size).toBeGreaterThan(50);

    const adminToken = tower.adminToken;
    tower = await spawnTower(home.dir);
    expect(tower.adminToken).toBe(adminToken); // the bootstrap token is written once
    const listed = await fetch(`${tower.url}/work/missions/${mission.mission.id}/tasks?limit=100000`, {
      headers: { authorization: `Bearer ${adminToken}` },
    });
    const ids = new Set(((await listed.json()) as { tasks: { id: string }[] }).tasks.map((t) => t.id));
    const lost = [...acked].filter((id) => !ids.has(id));
    expect(lost).toEqual([]);
    // every event refers to a task that exists, and SQLite says the file is sound
    await tower.stop();
    const db = new Database(join(home.dir, "tower", "ep.db"), { readonly: true });
    expect(db.pragma("integrity_check", { simple: true })).toBe("ok");
    expect(db.pragma("foreign_key_check")).toEqual([]);
    const orphans = db
      .prepare("SELECT COUNT(*) AS n FROM events WHERE task_id <> '' AND task_id NOT IN (SELECT id FROM tasks)")
      .get() as { n: number };
    expect(orphans.n).toBe(0);
    const created = db.prepare("SELECT COUNT(*) AS n FROM events WHERE name = 'task.created'").get() as { n: number };
    expect(created.n).toBe(ids.size); // state change and its event commit together
    db.close();
  });
});
