// What a run gets of its parents: those the assignment carried are used as sent (no GetTask),
// the others read from the tower, all in depends_on order; a parent that cannot be read fails the
// run naming it.
import { create } from "@bufbuild/protobuf";
import { ConnectError, Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { TaskSchema, TaskStatus, type Task } from "../../gen/ep/tower/v1/resources_pb.js";
import { loadParents } from "./parent-results.js";

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
