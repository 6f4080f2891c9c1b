// Structured log lines through pino (fastify's own logger): one JSON object per line on stderr,
// {"level":"info","ts":"…","component":"tower","msg":"…",…fields}, at EP_LOG_LEVEL (default
// info). A line written while the tower serves a request carries that request's id (`req_id`),
// whoever logs it: the edge, the domain or the store (requestScope, set by the HTTP app where it
// is cheap, asyncContextIsCheap(), or at debug level); fastify's own lines about a request always do.
import { AsyncLocalStorage } from "node:async_hooks";
import { pino, type Logger as PinoLogger } from "pino";

export type LogLevel = "debug" | "info" | "warn" | "error";
const LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error"];

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

/** The id of the request being served, for every line logged while serving it. */
export const requestScope = new AsyncLocalStorage<string>();

/**
 * Whether AsyncLocalStorage costs nothing per promise here: built on AsyncContextFrame (the
 * default from Node 24, a flag on 22), not on promise hooks, which tax every promise of the
 * process once a scope is entered (the tower's REST path by 4–12 %: docs/perf-history.md).
 */
export function asyncContextIsCheap(
  version = process.versions.node,
  flags: readonly string[] = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? "").split(/\s+/)],
): boolean {
  if (flags.includes("--no-async-context-frame")) return false;
  return flags.includes("--experimental-async-context-frame") || Number(version.split(".")[0]) >= 24;
}

/** The key a request's id is logged under (fastify's own request lines use it too). */
export const REQUEST_ID_KEY = "req_id";

const PINO = Symbol("pino");

/**
 * The pino logger under `log`, for fastify's loggerInstance; undefined for a logger that is not pino's (silentLogger, a
 * test's).
 */
export function pinoOf(log: Logger): PinoLogger | undefined {
  return (log as Logger & { [PINO]?: PinoLogger })[PINO];
}

function levelOf(text: string | undefined): LogLevel {
  return LEVELS.includes(text as LogLevel) ? (text as LogLevel) : "info";
}

function wrap(p: PinoLogger): Logger {
  // pino takes (fields, msg); EP's callers write (msg, fields)
  const log: Logger & { [PINO]: PinoLogger } = {
    [PINO]: p,
    debug: (m, f) => p.debug(f ?? {}, m),
    info: (m, f) => p.info(f ?? {}, m),
    warn: (m, f) => p.warn(f ?? {}, m),
    error: (m, f) => p.error(f ?? {}, m),
    child: (fields) => wrap(p.child(fields)),
  };
  return log;
}

/**
 * A logger for one component (`tower`, `epd`, `fanout`…). `write` receives each line without its
 * newline (tests, and epd's log file); by default lines go to stderr, written synchronously so
 * the last lines before an exit are not lost. No pretty mode: pino prints pretty only through
 * pino-pretty, which EP does not depend on (pipe the JSON to it, or to jq, on a terminal).
 */
export function createLogger(
  component: string,
  opts: { level?: LogLevel; write?: (line: string) => void; base?: Record<string, unknown> } = {},
): Logger {
  const write = opts.write;
  const destination = write
    ? { write: (line: string) => write(line.replace(/\n$/, "")) }
    : pino.destination({ fd: 2, sync: true });
  const p = pino(
    {
      level: opts.level ?? levelOf(process.env.EP_LOG_LEVEL),
      base: { component, ...opts.base },
      messageKey: "msg",
      timestamp: () => `,"ts":"${new Date().toISOString()}"`,
      formatters: { level: (label) => ({ level: label }) },
      // a request's id on every line logged while serving it, unless the line's logger is already bound to it
      mixin: (_merge, _level, logger) => {
        const id = requestScope.getStore();
        return id && !(REQUEST_ID_KEY in logger.bindings()) ? { [REQUEST_ID_KEY]: id } : {};
      },
      // credentials in a request that fastify logs (an error with its request) never reach a line
      redact: {
        paths: [
          "req.headers.authorization",
          "req.headers.cookie",
          'req.headers["x-ep-attach-proof"]',
          "headers.authorization",
          "headers.cookie",
        ],
        censor: "[redacted]",
      },
      serializers: {
        req: (req: { method?: string; url?: string; id?: string }) => ({
          method: req.method,
          url: req.url?.split("?", 1)[0],
          id: req.id,
        }),
      },
    },
    destination,
  );
  return wrap(p);
}

export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child: () => silentLogger,
};
