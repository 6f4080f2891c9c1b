// The secrets broker behind secrets.sock. A request names a session (EP_SECRETS_SESSION) and a
// secret; the session must belong to a live agent subprocess this daemon started (the worker's
// session table), and the tower decides on every request whether the secret is granted to that
// agent (SecretService.ResolveSecret with the node token), so a revoked grant or an ended
// session fails the very next get. Nothing is cached for serving. The values a run fetched are
// kept in memory only so its output, progress, result and the daemon's log can be redacted:
// until the run's redactor is released (the worker does that once the outcome is built), or,
// for a run without one, until its session ends. Nothing here logs or echoes a value.
import { createClient, type Transport } from "@connectrpc/connect";
import { EpError, toEpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import { SecretService } from "../../gen/ep/tower/v1/secrets_pb.js";
import type { GetSecret } from "../mgmt/secrets-line.js";
import type { ProgressFrame, RunResult } from "../runtimes/runtime.js";
import type { SecretsSession } from "../worker/sessions.js";
import { createStreamRedactor, redactDeep, redactText, snapshot, type StreamRedactor } from "./redact.js";

/** Asks the tower for a value on behalf of an agent; rejects with the tower's EpError. */
export type ResolveSecret = (agentId: string, name: string) => Promise<string>;

export interface SecretsBrokerDeps {
  /** the worker's session table: a session is live while it is in there */
  sessions: { get(id: string): SecretsSession | undefined };
  resolve: ResolveSecret;
  log: Logger;
}

/** One run's view of redaction; release() forgets the values this run fetched. */
export interface RunRedactor {
  text(s: string): string;
  /** A copy with every string (and object key) redacted, e.g. an event payload. */
  deep<T>(v: T): T;
  frame(f: ProgressFrame): ProgressFrame;
  result(r: RunResult): RunResult;
  /** A redactor for one stream of the run's output (its stdout), which finds a value cut across pieces. */
  stream(): StreamRedactor;
  release(): void;
}

export interface SecretsBroker {
  /** For serveSecretsSocket: value of `name` for the agent holding `session`, or an EpError. */
  getSecret: GetSecret;
  /** Holds the run's fetched values for redaction until release(). */
  redactor(sessionId: string): RunRedactor;
  /** Redacts against every value still held (all runs). */
  redact(text: string): string;
  redactDeep<T>(v: T): T;
  /** The held values (name, value), for a redacting logger. */
  values(): Iterable<[string, string]>;
  /** Forgets everything. */
  close(): void;
}

/** ResolveSecret over the daemon's authenticated tower transport (node JWT). */
export function towerResolver(transport: () => Transport, timeoutMs = 10_000): ResolveSecret {
  let client: ReturnType<typeof createClient<typeof SecretService>> | undefined;
  return async (agentId, name) => {
    client ??= createClient(SecretService, transport());
    try {
      return (await client.resolveSecret({ agentId, name }, { timeoutMs })).value;
    } catch (err) {
      const ep = toEpError(err);
      if (ep.errorClass === "unavailable" || ep.errorClass === "rate_limited") {
        throw new EpError("unavailable", `the tower cannot be reached to resolve ${name}; retry shortly`);
      }
      if (ep.errorClass === "unauthenticated")
        throw new EpError("unavailable", "the tower refused this node's credentials; re-register the node");
      // the tower's own messages name the secret and agent only; anything unexpected stays generic
      if (ep.errorClass === "internal" && !(err instanceof EpError) && !ep.message)
        throw new EpError("internal", "the tower failed to resolve the secret");
      throw ep;
    }
  };
}

interface Vault {
  values: Map<string, string>;
  /** a run's redactor holds it past the session's end */
  held: boolean;
}

export function createSecretsBroker(deps: SecretsBrokerDeps): SecretsBroker {
  const { sessions, log } = deps;
  const vaults = new Map<string, Vault>();

  const vault = (id: string): Vault => {
    let v = vaults.get(id);
    if (!v) vaults.set(id, (v = { values: new Map(), held: false }));
    return v;
  };
  /** Values of ended sessions that no redactor holds are dropped. */
  const sweep = () => {
    for (const [id, v] of vaults) if (!v.held && !sessions.get(id)) vaults.delete(id);
  };
  function* values(): Iterable<[string, string]> {
    for (const v of vaults.values()) yield* v.values;
  }
  const current = () => {
    sweep();
    return snapshot(values);
  };

  const live = (session: string): SecretsSession => {
    const s = sessions.get(session);
    if (!s)
      throw new EpError(
        "forbidden",
        "the session is not a live agent session of this daemon (it ended, or it was never issued)",
      );
    return s;
  };

  return {
    async getSecret(session, name) {
      sweep();
      const s = live(session);
      const value = await deps.resolve(s.agentId, name);
      // the run may have ended while the tower answered
      live(session);
      vault(session).values.set(name, value);
      log.debug("secret handed out", { session, agent_id: s.agentId, task_id: s.taskId, name });
      return value;
    },

    redactor(sessionId) {
      const v = vault(sessionId);
      v.held = true;
      return {
        text: (t) => redactText(t, current()),
        deep: (x) => redactDeep(x, current()),
        frame: (f) => {
          const vals = current();
          if (!vals.length) return f;
          return { ...f, text: redactText(f.text, vals), ...(f.data ? { data: redactDeep(f.data, vals) } : {}) };
        },
        result: (r) => {
          const vals = current();
          if (!vals.length) return r;
          return {
            ...r,
            output: redactText(r.output, vals),
            ...(r.error !== undefined ? { error: redactText(r.error, vals) } : {}),
            // a refused command may carry a value the agent fetched
            ...(r.denials ? { denials: redactDeep(r.denials, vals) } : {}),
          };
        },
        stream: () => createStreamRedactor(current),
        release: () => {
          v.values.clear();
          vaults.delete(sessionId);
        },
      };
    },

    redact: (text) => redactText(text, current()),
    redactDeep: (x) => redactDeep(x, current()),
    values,
    close() {
      for (const v of vaults.values()) v.values.clear();
      vaults.clear();
    },
  };
}
