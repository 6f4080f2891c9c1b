// Secrets sessions: one fresh random id per agent subprocess, handed to it as EP_SECRETS_SESSION.
// The secrets broker (secrets.sock) accepts a session only while its run is alive.
import { randomBytes } from "node:crypto";

export interface SecretsSession {
  id: string;
  taskId: string;
  agentId: string;
  domainId: string;
  startedAt: number;
  pid?: number;
}

export interface SessionTable {
  open(info: Omit<SecretsSession, "id" | "startedAt">): SecretsSession;
  get(id: string): SecretsSession | undefined;
  end(id: string): void;
  list(): SecretsSession[];
}

export function createSessionTable(now: () => number = Date.now): SessionTable {
  const sessions = new Map<string, SecretsSession>();
  return {
    open(info) {
      const s: SecretsSession = { ...info, id: `ses_${randomBytes(18).toString("base64url")}`, startedAt: now() };
      sessions.set(s.id, s);
      return s;
    },
    get: (id) => sessions.get(id),
    end: (id) => void sessions.delete(id),
    list: () => [...sessions.values()],
  };
}
