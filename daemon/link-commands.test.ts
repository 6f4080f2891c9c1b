// Link commands routed to their targets by their typed case: a task assignment goes to the
// worker's take, a malformed one (no task in it) is logged and dropped; cancel and merge reach
// theirs; a command this daemon does not know is logged.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { LinkResponseSchema } from "../gen/ep/tower/v1/fleet_pb.js";
import { TaskStatus } from "../gen/ep/tower/v1/resources_pb.js";
import type { Logger } from "../common/log.js";
import { routeLinkCommand, type LinkCommandTargets } from "./link-commands.js";

function targets() {
  const calls: string[] = [];
  const warned: string[] = [];
  const info: string[] = [];
  const log = {
    warn: (msg: string) => warned.push(msg),
    info: (msg: string) => info.push(msg),
    error: () => {},
    debug: () => {},
    child: () => log,
  } as unknown as Logger;
  const t: LinkCommandTargets = {
    fleet: { handleLink: () => false },
    worker: {
      cancel: (id, reason) => (calls.push(`cancel:${id}:${reason}`), true),
      take: (agentId, task) => void calls.push(`take:${agentId}:${task.id}:${task.leaseId}`),
    },
    agents: { find: () => undefined },
    signals: { deliver: () => "one_shot_run" as const },
    attach: { handleLink: (d) => void calls.push(`attach:${d.attachId}`) },
    merges: { handle: async (d) => void calls.push(`merge:${d.taskId}:${d.requestId}`) },
    log,
  };
  return { t, calls, warned, info };
}

describe("link commands", () => {
  it("hands an assigned task to the worker with its lease, and drops one that carries no task", () => {
    const { t, calls, warned } = targets();
    routeLinkCommand(
      create(LinkResponseSchema, {
        command: {
          case: "assign",
          value: { agentId: "agt_1", task: { id: "tsk_1", status: TaskStatus.RUNNING, leaseId: "ls_a" } },
        },
      }),
      t,
    );
    routeLinkCommand(create(LinkResponseSchema, { command: { case: "assign", value: { agentId: "agt_1" } } }), t);
    expect(calls).toEqual(["take:agt_1:tsk_1:ls_a"]);
    expect(warned).toEqual(["a task assignment without its task"]);
  });

  it("routes cancel (with a default reason), attach and merge to their targets", () => {
    const { t, calls } = targets();
    routeLinkCommand(
      create(LinkResponseSchema, { command: { case: "cancel", value: { taskId: "tsk_1", agentId: "agt_1" } } }),
      t,
    );
    routeLinkCommand(
      create(LinkResponseSchema, { command: { case: "attach", value: { agentId: "agt_1", attachId: "att_1" } } }),
      t,
    );
    routeLinkCommand(
      create(LinkResponseSchema, { command: { case: "merge", value: { taskId: "tsk_1", requestId: "mrg_1" } } }),
      t,
    );
    expect(calls).toEqual(["cancel:tsk_1:cancelled on the tower", "attach:att_1", "merge:tsk_1:mrg_1"]);
  });

  it("logs a command it does not handle (an empty one from a newer tower) and carries on", () => {
    const { t, calls, info } = targets();
    routeLinkCommand(create(LinkResponseSchema, {}), t);
    expect(calls).toEqual([]);
    expect(info).toEqual(["link command not handled by this daemon"]);
  });
});
