// The one mapping between the contract's enums and the lowercase words of REST and the CLI.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import {
  ApprovalSchema,
  ApprovalStatus,
  ApprovalStatusSchema,
  ListApprovalsRequestSchema,
  ListApprovalsResponseSchema,
} from "../gen/ep/tower/v1/approvals_pb.js";
import { Runtime, RuntimeSchema, TaskSchema } from "../gen/ep/tower/v1/resources_pb.js";
import { ReloadNodeConfigRequestSchema, ReportNodeStateRequestSchema } from "../gen/ep/tower/v1/fleet_pb.js";
import { durationFromMs, durationMs } from "@bufbuild/protobuf/wkt";
import { fromJson } from "@bufbuild/protobuf";
import { enumOf, enumsFromWords, enumValue, enumWord, isoOf, msOf, timestampOf } from "./vocab.js";
import { restJson } from "./rest-json.js";
import { RUNTIME_KINDS } from "./runtimes.js";

describe("vocab", () => {
  it("names an enum value by its lowercase word, and back; _UNSPECIFIED has none", () => {
    expect(enumWord(ApprovalStatusSchema, ApprovalStatus.EXPIRED)).toBe("expired");
    expect(enumWord(ApprovalStatusSchema, ApprovalStatus.UNSPECIFIED)).toBe("");
    expect(enumValue(ApprovalStatusSchema, " Pending ")).toBe(ApprovalStatus.PENDING);
    expect(enumValue(ApprovalStatusSchema, "unspecified")).toBeUndefined();
    expect(enumValue(ApprovalStatusSchema, "")).toBeUndefined();
  });

  it("spells runtimes as SPEC §1 does (capitals kept), every one of them, and reads them in any case", () => {
    expect(enumWord(RuntimeSchema, Runtime.VENDORA_CODE)).toBe("vendorA_code");
    expect(enumWord(RuntimeSchema, Runtime.VENDORA_AGENT_ACP)).toBe("vendorA_agent_acp");
    expect(enumWord(RuntimeSchema, Runtime.MUXHOST_HOSTED)).toBe("muxhost_hosted");
    // the enum and the list epd and the tools use are the same set
    expect(RuntimeSchema.values.filter((v) => v.number !== 0).map((v) => enumWord(RuntimeSchema, v.number))).toEqual([
      ...RUNTIME_KINDS,
    ]);
    expect(enumValue(RuntimeSchema, "vendorA_code")).toBe(Runtime.VENDORA_CODE);
    expect(enumValue(RuntimeSchema, "VENDORA_CODE")).toBe(Runtime.VENDORA_CODE);
    expect(() => enumOf(RuntimeSchema, "vendorD", "--runtime")).toThrow(
      "--runtime: must be one of vendorA_code, vendorA_agent_acp, " +
        'vendorB, vendorC, muxhost_hosted, shell (got "vendorD")',
    );
  });

  it('writes Timestamps as REST always wrote times (milliseconds kept, unset as "") and reads them back', () => {
    const task = create(TaskSchema, {
      id: "t",
      createdAt: timestampOf("2026-11-26T17:00:05.000Z"),
      updatedAt: timestampOf("2026-11-26T17:00:05.120Z"),
    });
    expect(restJson(TaskSchema, task)).toMatchObject({
      created_at: "2026-11-26T17:00:05.000Z",
      updated_at: "2026-11-26T17:00:05.120Z",
      lease_expires_at: "",
    });
    expect(isoOf(task.updatedAt)).toBe("2026-11-26T17:00:05.120Z");
    expect(msOf(task.createdAt)).toBe(Date.parse("2026-11-26T17:00:05Z"));
    expect([isoOf(undefined), timestampOf(""), Number.isNaN(msOf(undefined))]).toEqual(["", undefined, true]);
    // a REST body's "" time is unset, a time is read (nested in lists too)
    const body = enumsFromWords(ReportNodeStateRequestSchema, {
      cron_jobs: [{ name: "j", next_fire_at: "", last_fire: { fired_at: "2026-11-26T17:00:05.000Z" } }],
    });
    const req = fromJson(ReportNodeStateRequestSchema, body as never);
    expect(req.cronJobs[0].nextFireAt).toBeUndefined();
    expect(isoOf(req.cronJobs[0].lastFire?.firedAt)).toBe("2026-11-26T17:00:05.000Z");
  });

  it("speaks a Duration as <name>_ms in milliseconds both ways, and refuses what is not a whole number of them", () => {
    expect(
      restJson(
        ReloadNodeConfigRequestSchema,
        create(ReloadNodeConfigRequestSchema, { nodeId: "n", wait: durationFromMs(1500) }),
      ),
    ).toEqual({ node_id: "n", wait_ms: 1500 });
    expect(restJson(ReloadNodeConfigRequestSchema, create(ReloadNodeConfigRequestSchema, { nodeId: "n" }))).toEqual({
      node_id: "n",
      wait_ms: 0,
    });
    const read = (body: object) =>
      fromJson(ReloadNodeConfigRequestSchema, enumsFromWords(ReloadNodeConfigRequestSchema, body) as never);
    expect(durationMs(read({ node_id: "n", wait_ms: 250 }).wait!)).toBe(250);
    expect(read({ node_id: "n", wait_ms: 0 }).wait).toBeDefined(); // 0 is "do not wait", not unset
    expect(read({ node_id: "n" }).wait).toBeUndefined();
    for (const bad of [-1, 1.5, "10", null])
      expect(() => read({ wait_ms: bad })).toThrow(
        `wait_ms: must be a whole number of milliseconds, 0 or more (got ${JSON.stringify(bad)})`,
      );
  });

  it("shows enums as words at any depth of a message's REST JSON", () => {
    const msg = create(ListApprovalsResponseSchema, {
      approvals: [create(ApprovalSchema, { id: "apr_1", status: ApprovalStatus.APPROVED })],
    });
    expect((restJson(ListApprovalsResponseSchema, msg).approvals as { status: string }[])[0].status).toBe("approved");
  });

  it(
    "reads words (and proto names) in a request, and refuses " +
      "an unknown word naming the field and the words it takes",
    () => {
      expect(enumsFromWords(ListApprovalsRequestSchema, { status: "pending", domain_id: "d" })).toEqual({
        status: "APPROVAL_STATUS_PENDING",
        domain_id: "d",
      });
      expect(enumsFromWords(ListApprovalsRequestSchema, { status: "APPROVAL_STATUS_REJECTED" })).toEqual({
        status: "APPROVAL_STATUS_REJECTED",
      });
      expect(enumsFromWords(ListApprovalsRequestSchema, { status: 2 })).toEqual({ status: 2 });
      expect(() => enumsFromWords(ListApprovalsRequestSchema, { status: "maybe" })).toThrow(
        'status: must be one of pending, approved, rejected, expired (got "maybe")',
      );
      expect(() => enumsFromWords(ListApprovalsResponseSchema, { approvals: [{ status: "nope" }] })).toThrow(
        /^approvals\[0\]\.status: must be one of/,
      );
    },
  );
});
