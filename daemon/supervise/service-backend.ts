// One interface for the service managers that keep supervised agents running: systemd user
// units when systemd is reachable, else the daemon's own detached process groups.
import { execFile } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";
import { EpError } from "../../common/errors.js";

export interface SupervisedAgent {
  /** Stable agent id (e.g. the profile id); names the unit / pid file. */
  id: string;
  /** Profile name, shown in events and unit descriptions. */
  name: string;
  /** argv of the long-running agent process; argv[0] is looked up on PATH. */
  command: string[];
  /** Absolute working directory (default: the daemon's). */
  cwd?: string;
  env?: Record<string, string>;
}

export interface ServiceBackend {
  readonly kind: "process" | "systemd";
  /** Starts the agent unless it is already running. Throws EpError (runtime_missing, unavailable, invalid_argument). */
  start(agent: SupervisedAgent): Promise<void>;
  /** Stops the agent and everything it started; a no-op when it is not running. */
  stop(id: string): Promise<void>;
  isAlive(id: string): Promise<boolean>;
  /** Main process id while running. */
  pid(id: string): Promise<number | undefined>;
  close(): Promise<void>;
}

const AGENT_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;
const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Rejects what no backend can represent safely (unit names, pid file names, env keys). */
export function validateAgent(agent: SupervisedAgent): void {
  if (typeof agent.id !== "string" || !AGENT_ID.test(agent.id)) {
    throw new EpError("invalid_argument", "agent id must be 1-128 letters, digits, '_', '.', ':' or '-'", {
      field: "id",
    });
  }
  if (!Array.isArray(agent.command) || agent.command.length === 0 || agent.command.some((a) => typeof a !== "string")) {
    throw new EpError("invalid_argument", "command must be a non-empty list of strings", { field: "command" });
  }
  if (!agent.command[0])
    throw new EpError("invalid_argument", "command[0] must name an executable", { field: "command" });
  if (agent.cwd !== undefined && !isAbsolute(agent.cwd)) {
    throw new EpError("invalid_argument", `cwd must be an absolute path, not "${agent.cwd}"`, { field: "cwd" });
  }
  for (const key of Object.keys(agent.env ?? {})) {
    if (!ENV_KEY.test(key))
      throw new EpError("invalid_argument", `env key "${key}" is not a valid variable name`, { field: `env.${key}` });
  }
}

/** Absolute path of an executable, looked up on PATH when it has no slash. */
export function resolveExecutable(command: string, path: string = process.env.PATH ?? ""): string {
  const candidates = command.includes("/")
    ? [command]
    : path
        .split(delimiter)
        .filter(Boolean)
        .map((dir) => join(dir, command));
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return isAbsolute(candidate) ? candidate : join(process.cwd(), candidate);
    } catch {
      // try the next one
    }
  }
  throw new EpError(
    "runtime_missing",
    `The agent's executable "${command}" was not found${command.includes("/") ? "" : " on PATH"}.`,
    {
      field: "command",
      command,
    },
  );
}

/** True when `systemctl --user` can reach a user manager (a session bus exists). */
export function systemdAvailable(systemctl = "systemctl", env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  return new Promise((resolve) => {
    execFile(systemctl, ["--user", "show-environment"], { env, timeout: 3_000 }, (err) => resolve(!err));
  });
}
