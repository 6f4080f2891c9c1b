// Store rows to contract messages.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  AgentSchema,
  DomainSchema,
  EventSchema,
  MissionSchema,
  NodeSchema,
  TaskSchema,
  TokenSchema,
  type UsageSchema,
  type Agent,
  type Domain,
  type Event,
  type Mission,
  type Node,
  type Task,
  type Token,
} from "../../gen/ep/tower/v1/resources_pb.js";
import type { JsonObject } from "@bufbuild/protobuf";
import type { AgentRow, DomainRow, EventRow, MissionRow, NodeRow, TaskRow, TokenRow, UsageRow } from "../store/store.js";

export const domainMsg = (r: DomainRow): Domain => create(DomainSchema, r);
export const missionMsg = (r: MissionRow): Mission => create(MissionSchema, r);
export const nodeMsg = (r: NodeRow): Node => create(NodeSchema, r);
export const agentMsg = (r: AgentRow): Agent => create(AgentSchema, r);

export function taskMsg(r: TaskRow): Task {
  return create(TaskSchema, {
    id: r.id,
    domainId: r.domainId,
    missionId: r.missionId,
    kind: r.kind,
    title: r.title,
    description: r.description,
    status: r.status,
    claimPolicy: r.claimPolicy,
    priority: r.priority,
    capabilities: r.capabilities,
    assigneeAgentId: r.assigneeAgentId,
    attempts: r.attempts,
    maxAttempts: r.maxAttempts,
    runtime: r.runtime,
    input: (r.input ?? undefined) as JsonObject | undefined,
    result: r.result ? { ...r.result, usage: r.result.usage && usageMsg(r.result.usage) } : undefined,
    claimedBy: r.claimedBy,
    leaseExpiresAt: r.leaseExpiresMs == null ? "" : new Date(r.leaseExpiresMs).toISOString(),
    parentTaskId: r.parentTaskId,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
  });
}

export function tokenMsg(r: TokenRow): Token {
  return create(TokenSchema, {
    id: r.id,
    name: r.name,
    role: r.role,
    domainId: r.domainId,
    expiresAt: r.expiresAt,
    createdAt: r.createdAt,
    revokedAt: r.revokedAt,
    lastUsedAt: r.lastUsedAt,
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
    createdAt: r.createdAt,
  });
}

/** A stored usage (numbers) as the proto message (int64 token counts). */
export function usageMsg(u: UsageRow): MessageInitShape<typeof UsageSchema> {
  return { inputTokens: BigInt(Math.trunc(u.inputTokens)), outputTokens: BigInt(Math.trunc(u.outputTokens)), cachedInputTokens: BigInt(Math.trunc(u.cachedInputTokens)), costUsd: u.costUsd, model: u.model };
}
