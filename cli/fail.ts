// Turns any failure into `ep: <message>`, a hint line, and the exit code of its error class.
// Loaded only when something failed, so the error catalog (and Connect) never slows a good run.
import { Code, ConnectError } from "@connectrpc/connect";
import { EpError, toEpError } from "../common/errors.js";
import { ExitCode, UsageError, type Context } from "./context.js";
import { commandName } from "./registry.js";

/** An error with a hint of what to do next, set where the cause is known best. */
export interface Hinted {
  hint?: string;
}

export function withHint<E extends Error>(err: E, hint: string): E & Hinted {
  return Object.assign(err, { hint });
}

function defaultHint(ep: EpError, ctx: Context | undefined): string | undefined {
  const url = safeUrl(ctx);
  switch (ep.errorClass) {
    case "unauthenticated":
      return `log in with 'ep login --url ${url ?? "<url>"} --token <token>' or set EP_TOKEN`;
    case "forbidden":
      return "use a token with a higher role ('ep token create --role operator|admin' as an admin)";
    case "unavailable":
      return url
        ? `is the tower running at ${url}? start one with 'ep up' or point --url / EP_BASE_URL at it`
        : undefined;
    case "invalid":
      return ctx ? `see '${commandName(ctx.spec)} --help'` : undefined;
    default:
      return undefined;
  }
}

function safeUrl(ctx: Context | undefined): string | undefined {
  try {
    return ctx?.url();
  } catch {
    return undefined;
  }
}

export async function reportError(err: unknown, ctx: Context | undefined, argv: string[]): Promise<number> {
  const write = (s: string) => process.stderr.write(s + "\n");
  if (err instanceof ExitCode) return err.exitCode;
  if (err instanceof UsageError) {
    write(`ep: ${err.message}`);
    const hint =
      (err as Hinted).hint ??
      (ctx
        ? `usage: ${commandName(ctx.spec)} ${ctx.spec.usage}`.trimEnd() + `  (see '${commandName(ctx.spec)} --help')`
        : `see 'ep --help'`);
    write(`hint: ${hint}`);
    return 2;
  }
  let ep: EpError;
  let hint = (err as Hinted).hint;
  if (err instanceof ConnectError && err.code === Code.Unimplemented) {
    ep = new EpError(
      "route_not_found",
      `the tower at ${safeUrl(ctx) ?? "?"} does not serve ` +
        `${ctx ? `'${commandName(ctx.spec)}'` : "this call"} yet (${err.rawMessage || "unimplemented"})`,
    );
    hint ??= "upgrade the tower (or the daemon) to a version that serves it";
  } else if (
    err instanceof ConnectError &&
    err.code === Code.Unavailable &&
    /fetch failed|ECONNREFUSED|ENOTFOUND|connect/i.test(err.rawMessage)
  ) {
    ep = new EpError("unavailable", `cannot reach the tower at ${safeUrl(ctx) ?? "?"} (${err.rawMessage})`);
  } else {
    ep = toEpError(err);
  }
  if (ep.code === "internal" && !(err instanceof EpError) && !(err instanceof ConnectError) && process.env.EP_DEBUG)
    write(String((err as Error).stack));
  write(`ep: ${ep.message}`);
  hint ??= defaultHint(ep, ctx);
  if (hint) write(`hint: ${hint}`);
  if (argv.includes("--json")) process.stdout.write(JSON.stringify(ep.toJSON()) + "\n");
  return ep.exitCode;
}
