// The planner turns one operator message into a reply, MCP tool calls and view_specs. It
// never runs a tool: the caller runs read tools at once and turns write tools into pending
// actions. Which planner runs is chosen once at startup from the environment.
import type { Tool } from "../tools/index.js";
import type { ViewSpec } from "./view-spec.js";

export type Awaitable<T> = T | Promise<T>;

export interface ChatMessage {
  role: "user" | "assistant";
  content: string;
}

export interface PlannedToolCall {
  tool: string;
  arguments: Record<string, unknown>;
}

export interface PlanResult {
  /** Text for the transcript; never empty. */
  reply: string;
  /** Tool calls in order, each valid against the catalog. */
  toolCalls: PlannedToolCall[];
  /** Validated, script-free view_specs. */
  viewSpecs?: ViewSpec[];
}

export interface DomainRef {
  id: string;
  name: string;
}
export interface MissionRef {
  id: string;
  title: string;
  domain_id: string;
}
export interface TaskRef {
  id: string;
  title: string;
  mission_id: string;
  status?: string;
}
export interface AgentRef {
  id: string;
  name: string;
  domain_id?: string;
  state?: string;
}

/**
 * What a planner may look up while planning, implemented by the caller over the store.
 * Each `find*` accepts an id or a name/title (case-insensitive) and returns undefined when
 * nothing (or nothing unambiguous) matches.
 */
export interface PlannerContext {
  findDomain(nameOrId: string): Awaitable<DomainRef | undefined>;
  findMission(nameOrId: string, domainId?: string): Awaitable<MissionRef | undefined>;
  findTask(nameOrId: string, missionId?: string): Awaitable<TaskRef | undefined>;
  findAgent(nameOrId: string): Awaitable<AgentRef | undefined>;
  /** Ids of this session's actions still waiting for a decision. */
  listPendingActionIds(): Awaitable<string[]>;
  /** The domain to use when a request names none (e.g. the only domain); optional. */
  defaultDomain?(): Awaitable<DomainRef | undefined>;
  /** A short text snapshot (domains, missions, agents with ids) for LLM planners; optional. */
  snapshot?(): Awaitable<string>;
  /** Runtime for work created from this session unless the turn names one (EP_CENTRAL_RUNTIME_DEFAULT). */
  defaultRuntime?: string;
}

export interface PlanInput {
  content: string;
  history: ChatMessage[];
  tools: Tool[];
  context: PlannerContext;
}

export interface Planner {
  /** heuristic | providerA | providerB */
  readonly name: string;
  readonly model?: string;
  plan(input: PlanInput): Promise<PlanResult>;
}

export type Env = Record<string, string | undefined>;

export interface ProviderOptions {
  apiKey: string;
  model?: string;
  baseUrl?: string;
  /** Whole-request deadline; default 60 s. */
  timeoutMs?: number;
  maxTokens?: number;
  /** SDK retries on 429/5xx/connection errors; default 0 so a turn fails fast. */
  maxRetries?: number;
}
