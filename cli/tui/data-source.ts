// What the TUI needs from the platform. The real one talks to the tower (tower-source.ts);
// tests hand the TUI a small in-memory one.

export interface MissionItem {
  id: string;
  domainId: string;
  title: string;
  status: string;
}

export interface AgentItem {
  id: string;
  name: string;
  domainId: string;
  runtime: string;
  state: string;
}

export interface ApprovalItem {
  sessionId: string;
  id: string;
  tool: string;
  summary: string;
  status: string;
}

export interface EventItem {
  id: number;
  type: string;
  name: string;
  status: string;
  detail: string;
}

export interface ChatReply {
  sessionId: string;
  text: string;
  actions: ApprovalItem[];
}

export interface TuiDataSource {
  /** where the data comes from, shown in the header */
  label: string;
  missions(): Promise<MissionItem[]>;
  agents(): Promise<AgentItem[]>;
  approvals(): Promise<ApprovalItem[]>;
  /** follows the event log; returns a function that stops following */
  subscribe(onEvent: (e: EventItem) => void, onError: (err: Error) => void): () => void;
  chat(content: string): Promise<ChatReply>;
  approve(sessionId: string, actionId: string): Promise<ApprovalItem>;
  reject(sessionId: string, actionId: string): Promise<ApprovalItem>;
  close(): void;
}
