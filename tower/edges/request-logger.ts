// Fastify's logger for one request (request.log, reply.log), bound to the request's id only when
// it writes a line. Fastify makes one per request, and pino's child() (a new logger with its
// bindings serialized) cost each of the three REST calls of a task, while a request that goes
// well writes no line (no line per request: http.ts).
import type { FastifyBaseLogger } from "fastify";
import type { Bindings, ChildLoggerOptions } from "pino";

type Level = "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";

class RequestLogger {
  #bound: FastifyBaseLogger | undefined;
  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly own: Bindings,
    private readonly opts: ChildLoggerOptions,
  ) {}

  /** The pino child with the request's bindings, made on the first line. */
  private bound(): FastifyBaseLogger {
    return (this.#bound ??= this.parent.child(this.own, this.opts));
  }
  private write(level: Level, args: unknown[]): void {
    const l = this.bound();
    (l[level] as (...a: unknown[]) => void).apply(l, args);
  }

  get level(): string {
    return this.#bound?.level ?? this.opts.level ?? this.parent.level;
  }
  set level(level: string) {
    this.bound().level = level;
  }
  fatal(...args: unknown[]): void {
    this.write("fatal", args);
  }
  error(...args: unknown[]): void {
    this.write("error", args);
  }
  warn(...args: unknown[]): void {
    this.write("warn", args);
  }
  info(...args: unknown[]): void {
    this.write("info", args);
  }
  debug(...args: unknown[]): void {
    this.write("debug", args);
  }
  trace(...args: unknown[]): void {
    this.write("trace", args);
  }
  silent(...args: unknown[]): void {
    this.write("silent", args);
  }
  child(bindings: Bindings, opts?: ChildLoggerOptions): FastifyBaseLogger {
    return this.bound().child(bindings, opts);
  }
  isLevelEnabled(level: string): boolean {
    return (this.bound() as FastifyBaseLogger & { isLevelEnabled(l: string): boolean }).isLevelEnabled(level);
  }
  bindings(): Bindings {
    return (this.bound() as FastifyBaseLogger & { bindings(): Bindings }).bindings();
  }
}

/** Fastify's childLoggerFactory: request loggers that bind lazily. */
export const lazyRequestLogger = (
  logger: FastifyBaseLogger,
  bindings: Bindings,
  opts: ChildLoggerOptions,
): FastifyBaseLogger => new RequestLogger(logger, bindings, opts) as unknown as FastifyBaseLogger;
