// What a run gets of its parents: those the assignment carried are used as sent (no GetTask),
// the others read from the tower, all in depends_on order; a parent that cannot be read fails the
// run naming it.
import { create } from "@bufbuild/protobuf";
import { ConnectError, Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { TaskSchema, TaskStatus, type Task } from "../../gen/ep/tower/v1/resources_pb.js";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadParents, writeParentFiles } from "./parent-results.js";

const task = (id: string, dependsOn: string[] = [], output = "") =>
  create(TaskSchema, { id, dependsOn, status: TaskStatus.SUCCEEDED, result: { output } });

/** The tower's work client as loadParents uses it: GetTask of the tasks it has, counted. */
function towerWith(tasks: Task[]) {
  const asked: string[] = [];
  const work = {
    getTask: async ({ taskId }: { taskId: string }) => {
      asked.push(taskId);
      const t = tasks.find((x) => x.id === taskId);
      if (!t) throw new ConnectError(`task ${taskId} does not exist`, Code.NotFound);
      return { task: t };
    },
  };
  return { tower: { work } as never, asked };
}

describe("a run's parents", () => {
  it("are taken from the assignment when it carries them: the tower is asked for none", async () => {
    const { tower, asked } = towerWith([]);
    const child = task("tsk_c", ["tsk_b", "tsk_a"]);
    const got = await loadParents(tower, child, [task("tsk_a", [], "from-a"), task("tsk_b", [], "from-b")]);
    expect(got.map((p) => [p.id, p.result?.output])).toEqual([
      ["tsk_b", "from-b"],
      ["tsk_a", "from-a"],
    ]);
    expect(asked).toEqual([]);
  });

  it("are read from the tower, one GetTask each, when the assignment carried none or not all", async () => {
    const { tower, asked } = towerWith([task("tsk_a", [], "read-a"), task("tsk_b", [], "read-b")]);
    const child = task("tsk_c", ["tsk_a", "tsk_b"]);
    expect((await loadParents(tower, child)).map((p) => p.result?.output)).toEqual(["read-a", "read-b"]);
    expect(asked).toEqual(["tsk_a", "tsk_b"]);
    asked.length = 0;
    expect((await loadParents(tower, child, [task("tsk_b", [], "sent-b")])).map((p) => p.result?.output)).toEqual([
      "read-a",
      "sent-b",
    ]);
    expect(asked).toEqual(["tsk_a"]);
  });

  it("fail the run naming a parent the tower cannot give", async () => {
    const { tower } = towerWith([]);
    await expect(loadParents(tower, task("tsk_c", ["tsk_gone"]))).rejects.toThrow(
      /parent tsk_gone of task tsk_c could not be read/,
    );
  });
});

describe("writeParentFiles", () => {
  const withResult = (id: string, output: string, step = "") =>
    create(TaskSchema, { id, step, title: id, status: TaskStatus.SUCCEEDED, result: { output } });

  it("writes each parent's output and task, by id and step name, and the index", () => {
    const dir = mkdtempSync(join(tmpdir(), "ep-parents-"));
    try {
      const out = writeParentFiles(dir, [withResult("tsk_a", "A\n", "plan"), withResult("tsk_b", "B\n")]);
      expect(out).toBe(join(dir, "parents"));
      expect(readdirSync(out).sort()).toEqual(
        ["index.json", "plan.json", "plan.out", "tsk_a.json", "tsk_a.out", "tsk_b.json", "tsk_b.out"].sort(),
      );
      expect(readFileSync(join(out, "plan.out"), "utf8")).toBe("A\n");
      expect(JSON.parse(readFileSync(join(out, "index.json"), "utf8"))).toEqual([
        { id: "tsk_a", step: "plan", title: "tsk_a" },
        { id: "tsk_b", step: "", title: "tsk_b" },
      ]);
      expect(statSync(join(out, "tsk_b.out")).mode & 0o777).toBe(0o600);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it(
    "in a recycled folder: the old files become the new " + "ones (same inodes), the rest go; nothing stale is left",
    () => {
      const dir = mkdtempSync(join(tmpdir(), "ep-parents-"));
      try {
        const parents = join(dir, "parents");
        mkdirSync(parents);
        for (const [n, text] of Object.entries({
          "tsk_old.out": "OLD",
          "tsk_old.json": "{}",
          "review.out": "OLD",
          "review.json": "{}",
          "index.json": "[]",
        }))
          writeFileSync(join(parents, n), text);
        const inodes = new Set(readdirSync(parents).map((n) => statSync(join(parents, n)).ino));
        writeParentFiles(dir, [withResult("tsk_new", "NEW")], readdirSync(parents));
        expect(readdirSync(parents).sort()).toEqual(["index.json", "tsk_new.json", "tsk_new.out"]);
        expect(readFileSync(join(parents, "tsk_new.out"), "utf8")).toBe("NEW");
        expect(JSON.parse(readFileSync(join(parents, "tsk_new.json"), "utf8"))).toMatchObject({ id: "tsk_new" });
        expect(JSON.parse(readFileSync(join(parents, "index.json"), "utf8"))).toEqual([
          { id: "tsk_new", step: "", title: "tsk_new" },
        ]);
        for (const n of readdirSync(parents)) expect(inodes.has(statSync(join(parents, n)).ino)).toBe(true);
        // more files than the folder held: the others are made
        writeParentFiles(dir, [withResult("tsk_x", "X", "plan"), withResult("tsk_y", "Y")], readdirSync(parents));
        expect(readdirSync(parents)).toHaveLength(7);
        expect(readFileSync(join(parents, "plan.out"), "utf8")).toBe("X");
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
