// The secrets broker's wire: one JSON line {"op":"get","session","name"} answered by
// one JSON line {"ok":true,"value"} or {"ok":false,"error":{"code","message"}}, and
// the Connect SecretsService on the same socket. Who may read what is decided by the
// injected getSecret; this file only speaks the protocols. Values are never logged.
import type { ConnectRouter, ServiceImpl } from "@connectrpc/connect";
import { SecretsService } from "../../gen/ep/secrets/v1/secrets_pb.js";
import { EpError, invalidField, toEpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import { silentLogger } from "../../common/log.js";
import type { LineHandler, UnixSocketServer } from "./socket-server.js";
import { serveUnixSocket } from "./socket-server.js";

/** Returns the value of `name` for the agent subprocess holding `session`; throws EpError when it may not. */
export type GetSecret = (session: string, name: string) => Promise<string>;

export type SecretsLineReply = { ok: true; value: string } | { ok: false; error: { code: string; message: string } };

const REQUEST_FIELDS = new Set(["op", "session", "name"]);

export function createSecretsLineHandler(opts: { getSecret: GetSecret; log?: Logger }): LineHandler {
  const log = opts.log ?? silentLogger;
  return {
    async handleLine(line) {
      try {
        const { session, name } = parseRequest(line);
        const value = await fetchSecret(opts.getSecret, session, name, log);
        return JSON.stringify({ ok: true, value } satisfies SecretsLineReply);
      } catch (err) {
        return JSON.stringify(failure(err, log));
      }
    },
    lineTooLong(maxLineBytes) {
      const err = new EpError("payload_too_large", `a request line is limited to ${maxLineBytes} bytes`);
      return JSON.stringify(failure(err, log));
    },
  };
}

/** Registers SecretsService.GetSecret over the same getSecret as the line protocol. */
export function secretsRoutes(getSecret: GetSecret, log: Logger = silentLogger): (router: ConnectRouter) => void {
  return (router) => {
    router.service(SecretsService, {
      async getSecret(req) {
        return { value: await fetchSecret(getSecret, req.session, req.name, log) };
      },
    } satisfies ServiceImpl<typeof SecretsService>);
  };
}

export interface SecretsSocketOptions {
  path: string;
  getSecret: GetSecret;
  log: Logger;
  mode?: number;
}

/** secrets.sock: the line protocol and Connect SecretsService on one socket. */
export function serveSecretsSocket(opts: SecretsSocketOptions): Promise<UnixSocketServer> {
  return serveUnixSocket({
    path: opts.path,
    mode: opts.mode,
    routes: secretsRoutes(opts.getSecret, opts.log),
    lineProtocol: createSecretsLineHandler({ getSecret: opts.getSecret, log: opts.log }),
    log: opts.log,
  });
}

function parseRequest(line: string): { session: string; name: string } {
  let request: unknown;
  try {
    request = JSON.parse(line);
  } catch (err) {
    throw new EpError("invalid_json", `the request line is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof request !== "object" || request === null || Array.isArray(request)) {
    throw invalidField("request", 'must be a JSON object like {"op":"get","session":"…","name":"…"}');
  }
  const r = request as Record<string, unknown>;
  if (typeof r.op !== "string") throw invalidField("op", 'is required and must be a string; the only op is "get"');
  if (r.op !== "get") throw invalidField("op", `unknown op ${JSON.stringify(r.op)}; the only op is "get"`);
  const extra = Object.keys(r).find((k) => !REQUEST_FIELDS.has(k));
  if (extra !== undefined) {
    throw new EpError("unknown_field", `${extra}: unknown field; a request has op, session and name`, { field: extra });
  }
  if (typeof r.session !== "string")
    throw invalidField("session", "is required and must be a string (EP_SECRETS_SESSION)");
  if (typeof r.name !== "string") throw invalidField("name", "is required and must be a string");
  return { session: r.session, name: r.name };
}

async function fetchSecret(getSecret: GetSecret, session: string, name: string, log: Logger): Promise<string> {
  if (session === "") throw invalidField("session", "must not be empty (EP_SECRETS_SESSION)");
  if (name === "") throw invalidField("name", "must not be empty");
  try {
    return await getSecret(session, name);
  } catch (err) {
    const ep = safeError(err, log);
    log.info("secret request refused", { session, name, code: ep.code });
    throw ep;
  }
}

/** The text of an unexpected error could quote anything, a value included: it stays out of replies and logs. */
function safeError(err: unknown, log: Logger): EpError {
  if (err instanceof EpError) return err;
  const ep = toEpError(err);
  if (ep.code !== "internal") return ep;
  log.error("getSecret failed unexpectedly", { error: err instanceof Error ? err.name : typeof err });
  return new EpError("internal", "internal error; see the epd log");
}

function failure(err: unknown, log: Logger): SecretsLineReply {
  const ep = safeError(err, log);
  return { ok: false, error: { code: ep.code, message: ep.message } };
}
