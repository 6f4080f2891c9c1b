// The contract's task enums as the words the console shows and compares ("running",
// "claimable"): the one mapping of common/vocab.ts.
import { enumWord } from "@common/vocab.js";
import { AgentStateSchema, ClaimPolicySchema, RuntimeSchema, TaskKindSchema, TaskStatusSchema, type Agent, type Runtime, type Task } from "@gen/ep/tower/v1/resources_pb.js";

export const statusOf = (t: Pick<Task, "status">): string => enumWord(TaskStatusSchema, t.status);
export const kindOf = (t: Pick<Task, "kind">): string => enumWord(TaskKindSchema, t.kind);
export const claimPolicyOf = (t: Pick<Task, "claimPolicy">): string => enumWord(ClaimPolicySchema, t.claimPolicy);
export const agentStateOf = (a: Pick<Agent, "state">): string => enumWord(AgentStateSchema, a.state);
/** "vendorA_code", "shell", … ("" when unset: any runtime). */
export const runtimeWord = (r: Runtime): string => enumWord(RuntimeSchema, r);
