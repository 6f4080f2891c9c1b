// The contract's task enums as the words the console shows and compares ("running",
// "claimable"): the one mapping of common/vocab.ts.
import { enumWord } from "@common/vocab.js";
import { ActionStatusSchema, type PendingAction } from "@gen/ep/tower/v1/ai_pb.js";
import {
  AgentStateSchema,
  ClaimPolicySchema,
  MissionStatusSchema,
  RuntimeSchema,
  TaskKindSchema,
  TaskStatusSchema,
  type Agent,
  type Mission,
  type Runtime,
  type Task,
} from "@gen/ep/tower/v1/resources_pb.js";

export const statusOf = (t: Pick<Task, "status">): string => enumWord(TaskStatusSchema, t.status);
export const kindOf = (t: Pick<Task, "kind">): string => enumWord(TaskKindSchema, t.kind);
export const claimPolicyOf = (t: Pick<Task, "claimPolicy">): string => enumWord(ClaimPolicySchema, t.claimPolicy);
export const agentStateOf = (a: Pick<Agent, "state">): string => enumWord(AgentStateSchema, a.state);
/** "vendorA_code", "shell", … ("" when unset: any runtime). */
export const runtimeWord = (r: Runtime): string => enumWord(RuntimeSchema, r);
export const missionStatusOf = (m: Pick<Mission, "status">): string => enumWord(MissionStatusSchema, m.status);
/** "pending", "approved" or "rejected". */
export const actionStatusOf = (a: Pick<PendingAction, "status">): string => enumWord(ActionStatusSchema, a.status);
