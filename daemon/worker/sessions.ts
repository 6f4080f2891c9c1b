// Secrets sessions: one fresh random id per agent subprocess, handed to it as EP_SECRETS_SESSION.
// The secrets broker (secrets.sock) accepts a session only while its run is alive.
import { randomBytesPooled } from "../../common/random.js";

export interface SecretsSession {
  id: string;
  taskId: string;
  agentId: string;
  domainId: string;
  startedAt: number;
  pid?: number;
}

/** What a session id looks like (`ses_` + 18 random bytes, base64url). */
export const SESSION_ID = /^ses_[A-Za-z0-9_-]{24}$/;

export interface SessionTable {
  /**
   * Opens a session. `id` re-opens one a previous daemon handed to a process that outlived it
   * (a re-adopted profile agent); it must look like a session id and not be open already.
   */
  open(info: Omit<SecretsSession, "id" | "startedAt">, opts?: { id?: string }): SecretsSession;
  get(id: string): SecretsSession | undefined;
  end(id: string): void;
  list(): SecretsSession[];
}

export function createSessionTable(now: () => number = Date.now): SessionTable {
  const sessions = new Map<string, SecretsSession>();
  return {
    open(info, opts = {}) {
      if (opts.id !== undefined && (!SESSION_ID.test(opts.id) || sessions.has(opts.id))) {
        throw new Error(
          `cannot re-open secrets session ${JSON.stringify(opts.id)}: ` +
            `${SESSION_ID.test(opts.id) ? "it is open already" : "not a session id"}`,
        );
      }
      const s: SecretsSession = {
        ...info,
        id: opts.id ?? `ses_${randomBytesPooled(18).toString("base64url")}`,
        startedAt: now(),
      };
      sessions.set(s.id, s);
      return s;
    },
    get: (id) => sessions.get(id),
    end: (id) => void sessions.delete(id),
    list: () => [...sessions.values()],
  };
}
