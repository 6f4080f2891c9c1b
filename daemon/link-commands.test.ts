// Link commands routed to their targets: a pushed task goes to the worker's take, a malformed one
// (no task in it) is logged and dropped; task_ready hints are read per task, bad entries skipped.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { LinkResponseSchema } from "../gen/ep/tower/v1/fleet_pb.js";
import { TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import type { Logger } from "../common/log.js";
import { routeLinkCommand, wakeHints, type LinkCommandTargets } from "./link-commands.js";

function targets() {
  const calls: string[] = [];
  const warned: string[] = [];
  const log = { warn: (msg: string) => warned.push(msg), info: () => {}, error: () => {}, debug: () => {}, child: () => log } as unknown as Logger;
  const t: LinkCommandTargets = {
    fleet: { handleLink: () => false },
    worker: { wake: (h) => void calls.push(`wake:${h?.taskId ?? ""}`), cancel: (id) => (calls.push(`cancel:${id}`), true), take: (agentId, task) => void calls.push(`take:${agentId}:${task.id}`) },
    agents: { find: () => undefined },
    signals: { deliver: () => "one_shot_run" as const },
    attach: { handleLink: () => {} },
    merges: { handle: async (msg) => void calls.push(`merge:${msg.taskId}`) },
    log,
  };
  return { t, calls, warned };
}

describe("link commands", () => {
  it("hands a pushed task to the worker, and drops one that carries no task", () => {
    const { t, calls, warned } = targets();
    routeLinkCommand(create(LinkResponseSchema, { kind: "task", agentId: "agt_1", taskId: "tsk_1", task: { id: "tsk_1", status: TaskStatus.RUNNING } }), t);
    routeLinkCommand(create(LinkResponseSchema, { kind: "task", agentId: "agt_1", taskId: "tsk_2" }), t);
    expect(calls).toEqual(["take:agt_1:tsk_1"]);
    expect(warned).toEqual(["a pushed task without its task"]);
  });

  it("hands a merge to the merge requests", () => {
    const { t, calls } = targets();
    routeLinkCommand(create(LinkResponseSchema, { kind: "merge", taskId: "tsk_1", data: { request_id: "mrg_1" } }), t);
    expect(calls).toEqual(["merge:tsk_1"]);
  });

  it("reads task_ready hints per task and skips entries that are not objects", () => {
    const hints = wakeHints(create(LinkResponseSchema, { kind: "task_ready", taskId: "tsk_a", data: { tasks: [{ task_id: "tsk_a", domain_id: "dom_1", runtime: "shell", capabilities: ["gpu", 3] }, "junk", null, [1]] } }));
    expect(hints).toEqual([{ agentId: undefined, domainId: "dom_1", taskId: "tsk_a", runtime: "shell", capabilities: ["gpu"] }]);
  });
});
