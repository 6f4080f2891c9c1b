// taskMsg writes the Task message out instead of calling create(): it must be the message create()
// makes from the same row, field for field, so Connect's binary and JSON and REST's JSON read the same.
import { create, equals, toBinary, toJson, type JsonObject } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { TaskSchema, TaskStatus } from "../../gen/ep/tower/v1/resources_pb.js";
import type { TaskRow } from "../store/store.js";
import { claimPolicyOf, denialMsg, runtimeOf, taskKindOf, taskMsg, taskStatusOf, usageMsg } from "./convert.js";
import { timestampOf } from "../../common/vocab.js";

const row: TaskRow = {
  id: "tsk_1",
  domainId: "dom_1",
  missionId: "mis_1",
  kind: "claimable",
  title: "build",
  description: "the whole tree",
  status: "succeeded",
  claimPolicy: "first_claim",
  priority: 3,
  capabilities: ["linux", "gpu"],
  assigneeAgentId: "agt_2",
  attempts: 2,
  maxAttempts: 5,
  runtime: "shell",
  input: { n: 1, deep: { list: [1, "two"] } },
  result: {
    output: "ok",
    exitCode: 0,
    error: "",
    usage: { inputTokens: 10, outputTokens: 20, cachedInputTokens: 5, costUsd: 0.25, model: "m" },
    workspace: { repo: "/r", name: "w", branch: "b", base: "a1", head: "b2", committed: true } as never,
    denials: [{ tool: "bash", tried: "rm -rf /", reason: "no", source: "policy", callId: "c1" }],
  },
  claimedBy: "agt_1",
  leaseExpiresMs: 1_767_225_600_123,
  leaseId: "lse_1",
  parentTaskId: "tsk_0",
  dependsOn: ["tsk_a", "tsk_b"],
  step: "compile",
  createdAt: "2026-01-01T00:00:00.000Z",
  updatedAt: "2026-01-01T00:00:01.250Z",
};

/** The message as create() makes it from the row: what taskMsg returned before it was written out. */
function created(r: TaskRow) {
  return create(TaskSchema, {
    ...r,
    kind: taskKindOf(r.kind),
    status: taskStatusOf(r.status),
    claimPolicy: claimPolicyOf(r.claimPolicy),
    runtime: runtimeOf(r.runtime),
    input: (r.input ?? undefined) as JsonObject | undefined,
    result: r.result
      ? { ...r.result, usage: r.result.usage && usageMsg(r.result.usage), denials: r.result.denials?.map(denialMsg) }
      : undefined,
    leaseExpiresAt: r.leaseExpiresMs == null ? undefined : timestampFromMs(r.leaseExpiresMs),
    createdAt: timestampOf(r.createdAt),
    updatedAt: timestampOf(r.updatedAt),
  });
}

describe("taskMsg", () => {
  it.each([
    ["a finished task with every part of its result", row],
    [
      "a queued task: no result, no lease, no parents",
      { ...row, status: "queued", result: null, leaseExpiresMs: null },
    ],
    ["a result without exit code, usage, workspace or denials", { ...row, result: { output: "", error: "boom" } }],
  ] as [string, TaskRow][])("is the message create() makes: %s", (_, r) => {
    const msg = taskMsg(r);
    expect(equals(TaskSchema, msg, created(r))).toBe(true);
    expect(toBinary(TaskSchema, msg)).toEqual(toBinary(TaskSchema, created(r)));
    expect(toJson(TaskSchema, msg)).toEqual(toJson(TaskSchema, created(r)));
    expect(msg.status).toBe(taskStatusOf(r.status));
  });

  it("keeps every field of the contract, set or zero", () => {
    const msg = taskMsg({ ...row, status: "queued" });
    for (const f of TaskSchema.fields) if (f.fieldKind !== "message") expect(msg).toHaveProperty(f.localName);
    expect(msg.status).toBe(TaskStatus.QUEUED);
    expect(msg.waitingOn).toEqual([]);
  });
});
