// The approvals folder's face: the ApprovalService (agents ask, people decide). The rest of the
// folder is its own; other folders import only this and types.ts (docs/architecture.md).
export { type ApprovalServiceImpl, createApprovalService } from "./approvals.js";
