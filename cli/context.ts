// What a command receives: its parsed arguments, output helpers and the connection settings.
// Light on purpose: the tower client is loaded by the commands that talk to the tower.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { cliCredentialsFile, epHome } from "../common/paths.js";
import type { CommandSpec } from "./registry.js";

export type OptionValue = string | boolean | string[] | undefined;

/** A mistake in how the command was called: exit code 2 with the command's usage as the hint. */
export class UsageError extends Error {
  override readonly name = "UsageError";
  readonly exitCode = 2;
}

/** A failure the command already explained (printed output); carries only the exit code. */
export class ExitCode extends Error {
  override readonly name = "ExitCode";
  constructor(readonly exitCode: number) {
    super(`exit ${exitCode}`);
  }
}

export interface Context {
  spec: CommandSpec;
  args: string[];
  opts: Record<string, OptionValue>;
  json: boolean;
  env: NodeJS.ProcessEnv;
  /** the package version, set by the dispatcher */
  version: string;
  out(text: string): void;
  err(text: string): void;
  /** the tower URL: --url, else EP_BASE_URL, else the saved credentials' URL, else http://localhost:8008 */
  url(): string;
  /** the bearer token: --token, else EP_TOKEN, else saved credentials for this URL, else the local admin token */
  token(): string | undefined;
  str(name: string): string | undefined;
  list(name: string): string[];
  required(name: string): string;
}

export function normalizeUrl(url: string): string {
  return url.trim().replace(/\/+$/, "");
}

export function isLocalUrl(url: string): boolean {
  try {
    const host = new URL(url).hostname;
    return host === "localhost" || host === "::1" || host === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(host);
  } catch {
    return false;
  }
}

function readSavedCredentials(env: NodeJS.ProcessEnv): { url?: string; token?: string } | undefined {
  try {
    const doc = JSON.parse(readFileSync(cliCredentialsFile(env), "utf8")) as { url?: unknown; token?: unknown };
    return {
      url: typeof doc.url === "string" ? doc.url : undefined,
      token: typeof doc.token === "string" ? doc.token : undefined,
    };
  } catch {
    return undefined;
  }
}

export function createContext(
  spec: CommandSpec,
  args: string[],
  opts: Record<string, OptionValue>,
  env: NodeJS.ProcessEnv = process.env,
): Context {
  let saved: { url?: string; token?: string } | undefined | null = null;
  const savedCreds = () => (saved === null ? (saved = readSavedCredentials(env)) : saved);
  const ctx: Context = {
    spec,
    args,
    opts,
    json: opts.json === true,
    env,
    version: "0.0.0",
    out: (text) => void process.stdout.write(text.endsWith("\n") ? text : text + "\n"),
    err: (text) => void process.stderr.write(text.endsWith("\n") ? text : text + "\n"),
    url() {
      const flag = typeof opts.url === "string" ? opts.url : undefined;
      const raw = flag || env.EP_BASE_URL || savedCreds()?.url || "http://localhost:8008";
      const url = normalizeUrl(raw);
      if (!/^https?:\/\/[^/]/.test(url))
        throw new UsageError(`--url / EP_BASE_URL must be an http(s) URL (got ${JSON.stringify(raw)})`);
      return url;
    },
    token() {
      if (typeof opts.token === "string" && opts.token) return opts.token;
      if (env.EP_TOKEN) return env.EP_TOKEN;
      const url = ctx.url();
      const creds = savedCreds();
      // saved credentials only go to the tower they were saved for
      if (creds?.token && creds.url && normalizeUrl(creds.url) === url) return creds.token;
      if (isLocalUrl(url)) {
        try {
          return readFileSync(join(epHome(env), "tower", "admin.token"), "utf8").trim() || undefined;
        } catch {
          return undefined;
        }
      }
      return undefined;
    },
    str(name) {
      const v = opts[name];
      return typeof v === "string" ? v : undefined;
    },
    list(name) {
      const v = opts[name];
      return Array.isArray(v) ? v : typeof v === "string" ? [v] : [];
    },
    required(name) {
      const v = ctx.str(name);
      if (v === undefined || v === "") throw new UsageError(`--${name} is required`);
      return v;
    },
  };
  return ctx;
}
