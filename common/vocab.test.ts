// The one mapping between the contract's enums and the lowercase words of REST and the CLI.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { ApprovalSchema, ApprovalStatus, ApprovalStatusSchema, ListApprovalsRequestSchema, ListApprovalsResponseSchema } from "../gen/ep/tower/v1/approvals_pb.js";
import { enumsFromWords, enumValue, enumWord, restJson } from "./vocab.js";

describe("vocab", () => {
  it("names an enum value by its lowercase word, and back; _UNSPECIFIED has none", () => {
    expect(enumWord(ApprovalStatusSchema, ApprovalStatus.EXPIRED)).toBe("expired");
    expect(enumWord(ApprovalStatusSchema, ApprovalStatus.UNSPECIFIED)).toBe("");
    expect(enumValue(ApprovalStatusSchema, " Pending ")).toBe(ApprovalStatus.PENDING);
    expect(enumValue(ApprovalStatusSchema, "unspecified")).toBeUndefined();
    expect(enumValue(ApprovalStatusSchema, "")).toBeUndefined();
  });

  it("shows enums as words at any depth of a message's REST JSON", () => {
    const msg = create(ListApprovalsResponseSchema, { approvals: [create(ApprovalSchema, { id: "apr_1", status: ApprovalStatus.APPROVED })] });
    expect((restJson(ListApprovalsResponseSchema, msg).approvals as { status: string }[])[0].status).toBe("approved");
  });

  it("reads words (and proto names) in a request, and refuses an unknown word naming the field and the words it takes", () => {
    expect(enumsFromWords(ListApprovalsRequestSchema, { status: "pending", domain_id: "d" })).toEqual({ status: "APPROVAL_STATUS_PENDING", domain_id: "d" });
    expect(enumsFromWords(ListApprovalsRequestSchema, { status: "APPROVAL_STATUS_REJECTED" })).toEqual({ status: "APPROVAL_STATUS_REJECTED" });
    expect(enumsFromWords(ListApprovalsRequestSchema, { status: 2 })).toEqual({ status: 2 });
    expect(() => enumsFromWords(ListApprovalsRequestSchema, { status: "maybe" })).toThrow('status: must be one of pending, approved, rejected, expired (got "maybe")');
    expect(() => enumsFromWords(ListApprovalsResponseSchema, { approvals: [{ status: "nope" }] })).toThrow(/^approvals\[0\]\.status: must be one of/);
  });
});
