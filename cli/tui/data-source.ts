// What the TUI needs from the platform. The real one talks to the tower (tower-source.ts);
// tests hand the TUI a small in-memory one.

export interface MissionItem {
  id: string;
  domainId: string;
  /** the domain's name, for people (the id when unknown) */
  domainName: string;
  title: string;
  status: string;
}

export interface AgentItem {
  id: string;
  name: string;
  domainId: string;
  runtime: string;
  state: string;
  /** the task it is running, if any */
  taskTitle?: string;
}

export interface TaskItem {
  id: string;
  missionId: string;
  title: string;
  status: string;
  runtime: string;
  /** who runs (or ran) it, by name; "" when nobody claimed it yet */
  agent: string;
  /**
   * a waiting task's parents that have not succeeded, by step name or title where the list has them (docs/pipelines.md)
   */
  waitingOn?: string[];
}

export interface TaskDetail extends TaskItem {
  attempts: number;
  maxAttempts: number;
  createdAt: string;
  output: string;
  error: string;
  /** tokens and cost in one line, "" when the runtime reported none */
  usage: string;
  /** the workspace change: its branch line and `diff --stat` (absent when the task named no workspace) */
  workspace?: { branch: string; stat: string };
  /** the tool calls its agent was refused, one line each (result.denials; absent when none) */
  denials?: string[];
  /** why it waits ("no_agent_in_domain: no agent serves …"; absent when nothing holds it back) */
  wait?: string;
}

/** One progress frame of a task (what the agent printed, a tool call, a status line). */
export interface FrameItem {
  id: number;
  kind: string;
  text: string;
  data?: Record<string, unknown>;
}

export interface EventItem {
  id: number;
  type: string;
  name: string;
  status: string;
  /** what happened, in words: the resource's title or name, a message; never raw JSON */
  detail: string;
  /** ISO time, when known */
  at?: string;
  taskId?: string;
  /** set for progress events */
  frame?: FrameItem;
}

export interface ApprovalItem {
  /** the AI session of a pending action; "" for an agent's tool-permission request (id apr_…) */
  sessionId: string;
  id: string;
  tool: string;
  summary: string;
  status: string;
  /** the AI session's title, for people ("" when it has none or for a tool-permission request) */
  session?: string;
  /** why executing an approved action failed ("" or absent when it did not) */
  error?: string;
}

export interface ChatReply {
  sessionId: string;
  text: string;
  actions: ApprovalItem[];
  /** the reply's view_specs (tables, key/value lists…), rendered like the web console */
  viewSpecs?: unknown[];
}

export interface TuiDataSource {
  /** where the data comes from, shown in the header */
  label: string;
  missions(): Promise<MissionItem[]>;
  agents(): Promise<AgentItem[]>;
  approvals(): Promise<ApprovalItem[]>;
  tasks(missionId: string): Promise<TaskItem[]>;
  task(taskId: string): Promise<TaskDetail>;
  /** the task's progress so far, oldest first */
  frames(taskId: string): Promise<FrameItem[]>;
  cancelTask(taskId: string): Promise<TaskDetail>;
  retryTask(taskId: string): Promise<TaskDetail>;
  /** follows the event log; returns a function that stops following */
  subscribe(onEvent: (e: EventItem) => void, onError: (err: Error) => void): () => void;
  chat(content: string): Promise<ChatReply>;
  approve(sessionId: string, actionId: string): Promise<ApprovalItem>;
  reject(sessionId: string, actionId: string): Promise<ApprovalItem>;
  close(): void;
}
