// Store rows to contract messages.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  AgentSchema,
  DomainSchema,
  EventSchema,
  MissionSchema,
  NodeSchema,
  TokenSchema,
  DenialSchema,
  UsageSchema,
  WorkspaceResultSchema,
  type Agent,
  type Domain,
  type Event,
  type Mission,
  type Node,
  type Task,
  type TaskResult,
  type Token,
} from "../../gen/ep/tower/v1/resources_pb.js";
import type { DescEnum, JsonObject } from "@bufbuild/protobuf";
import { invalidField } from "../../common/errors.js";
import { enumValue, enumWord, timestampAt, timestampOf } from "../../common/vocab.js";
import {
  AgentStateSchema,
  ClaimPolicySchema,
  DenialSourceSchema,
  MissionStatusSchema,
  NodeStatusSchema,
  RoleSchema,
  RuntimeSchema,
  TaskKindSchema,
  TaskStatusSchema,
  type AgentState,
  type ClaimPolicy,
  type DenialSource,
  type MissionStatus,
  type NodeStatus,
  type Role,
  type Runtime,
  type TaskKind,
  type TaskStatus,
} from "../../gen/ep/tower/v1/resources_pb.js";
import type {
  AgentRow,
  DenialRow,
  DomainRow,
  EventRow,
  MissionRow,
  NodeRow,
  TaskResultRow,
  TaskRow,
  TokenRow,
  UsageRow,
} from "../store/store.js";

/**
 * A request's enum as the word the domain works with ("" when unset); a number the enum does
 * not have is invalid_argument naming the field.
 */
export function wordOf(e: DescEnum, v: number, field: string): string {
  const word = enumWord(e, v);
  if (!word && v !== 0)
    throw invalidField(field, `is not ${/^[AEIOU]/.test(e.name) ? "an" : "a"} ${e.name} (got ${v})`);
  return word;
}

/** A stored word as the contract's enum value (0 for a word it does not have). */
export const valueOf = <T extends number>(e: DescEnum, word: string): T => (enumValue(e, word) ?? 0) as T;
export const taskStatusOf = (word: string) => valueOf<TaskStatus>(TaskStatusSchema, word);
export const taskKindOf = (word: string) => valueOf<TaskKind>(TaskKindSchema, word);
export const claimPolicyOf = (word: string) => valueOf<ClaimPolicy>(ClaimPolicySchema, word);
export const agentStateOf = (word: string) => valueOf<AgentState>(AgentStateSchema, word);
export const nodeStatusOf = (word: string) => valueOf<NodeStatus>(NodeStatusSchema, word);
export const roleOf = (word: string) => valueOf<Role>(RoleSchema, word);
export const runtimeOf = (word: string) => valueOf<Runtime>(RuntimeSchema, word);

export const domainMsg = (r: DomainRow): Domain => create(DomainSchema, { ...r, createdAt: timestampOf(r.createdAt) });
export const missionMsg = (r: MissionRow): Mission =>
  create(MissionSchema, {
    ...r,
    status: valueOf<MissionStatus>(MissionStatusSchema, r.status),
    createdAt: timestampOf(r.createdAt),
    updatedAt: timestampOf(r.updatedAt),
  });
export const nodeMsg = (r: NodeRow): Node =>
  create(NodeSchema, {
    ...r,
    status: nodeStatusOf(r.status),
    lastSeenAt: timestampOf(r.lastSeenAt),
    createdAt: timestampOf(r.createdAt),
  });
export const agentMsg = (r: AgentRow): Agent =>
  create(AgentSchema, {
    ...r,
    state: agentStateOf(r.state),
    runtime: runtimeOf(r.runtime),
    lastSeenAt: timestampOf(r.lastSeenAt),
    createdAt: timestampOf(r.createdAt),
  });

/**
 * A task row as the contract's Task, the message written out: every answer on the work path carries
 * one, and create() walks the descriptor field by field (and again for the result). The compiler
 * checks that every field is here; convert.test.ts that it is the message create() makes.
 */
export function taskMsg(r: TaskRow): Task {
  return {
    $typeName: "ep.tower.v1.Task",
    id: r.id,
    domainId: r.domainId,
    missionId: r.missionId,
    kind: taskKindOf(r.kind),
    title: r.title,
    description: r.description,
    status: taskStatusOf(r.status),
    claimPolicy: claimPolicyOf(r.claimPolicy),
    priority: r.priority,
    capabilities: r.capabilities,
    assigneeAgentId: r.assigneeAgentId,
    attempts: r.attempts,
    maxAttempts: r.maxAttempts,
    runtime: runtimeOf(r.runtime),
    input: (r.input ?? undefined) as JsonObject | undefined,
    result: r.result ? taskResultMsg(r.result) : undefined,
    claimedBy: r.claimedBy,
    leaseExpiresAt: r.leaseExpiresMs == null ? undefined : timestampAt(r.leaseExpiresMs),
    parentTaskId: r.parentTaskId,
    createdAt: timestampOf(r.createdAt),
    updatedAt: timestampOf(r.updatedAt),
    leaseId: r.leaseId,
    dependsOn: r.dependsOn,
    step: r.step,
    waitingOn: [],
  };
}

/** A stored result as the contract's TaskResult (read from JSON: an absent part is unset). */
function taskResultMsg(r: TaskResultRow): TaskResult {
  return {
    $typeName: "ep.tower.v1.TaskResult",
    output: r.output ?? "",
    exitCode: r.exitCode ?? undefined,
    error: r.error ?? "",
    usage: r.usage ? create(UsageSchema, usageMsg(r.usage)) : undefined,
    workspace: r.workspace ? create(WorkspaceResultSchema, r.workspace) : undefined,
    denials: r.denials ? r.denials.map((d) => create(DenialSchema, denialMsg(d))) : [],
  };
}

export function tokenMsg(r: TokenRow): Token {
  return create(TokenSchema, {
    id: r.id,
    name: r.name,
    role: roleOf(r.role),
    domainId: r.domainId,
    expiresAt: timestampOf(r.expiresAt),
    createdAt: timestampOf(r.createdAt),
    revokedAt: timestampOf(r.revokedAt),
    lastUsedAt: timestampOf(r.lastUsedAt),
  });
}

export function eventMsg(r: EventRow): Event {
  return create(EventSchema, {
    id: BigInt(r.id),
    type: r.type,
    name: r.name,
    domainId: r.domainId,
    missionId: r.missionId,
    agentId: r.agentId,
    taskId: r.taskId,
    sessionId: r.sessionId,
    status: r.status,
    payload: r.payload as JsonObject,
    createdAt: timestampOf(r.createdAt),
  });
}

/** A stored denial as the proto message (its source word as DenialSource). */
export const denialMsg = (d: DenialRow): MessageInitShape<typeof DenialSchema> => ({
  ...d,
  source: valueOf<DenialSource>(DenialSourceSchema, d.source),
});

/** A stored usage (numbers) as the proto message (int64 token counts). */
export function usageMsg(u: UsageRow): MessageInitShape<typeof UsageSchema> {
  return {
    inputTokens: BigInt(Math.trunc(u.inputTokens)),
    outputTokens: BigInt(Math.trunc(u.outputTokens)),
    cachedInputTokens: BigInt(Math.trunc(u.cachedInputTokens)),
    costUsd: u.costUsd,
    model: u.model,
  };
}
