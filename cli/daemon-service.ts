// How `ep daemon up|down|status|logs` runs epd: a systemd user unit when systemd is there,
// otherwise a detached process with a pid file and a log file in $EP_HOME/epd/.
import { spawn, spawnSync } from "node:child_process";
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { daemonHome, daemonSockets, epHome } from "../common/paths.js";

export const UNIT_NAME = "epd.service";

/** The bin/<name>.js next to the running `ep` (works from a checkout and from a global install). */
export function siblingBin(name: "epd" | "ep-tower", env: NodeJS.ProcessEnv = process.env): string {
  const override = name === "epd" ? env.EP_EPD_BIN : env.EP_TOWER_BIN;
  if (override) return resolve(override);
  const self = realpathSync(process.argv[1]);
  return join(dirname(self), `${name}.js`);
}

export function envFilePath(env: NodeJS.ProcessEnv = process.env): string {
  return join(epHome(env), "epd.env");
}

export function unitPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.XDG_CONFIG_HOME || join(env.HOME || homedir(), ".config"), "systemd", "user", UNIT_NAME);
}

export function daemonFiles(env: NodeJS.ProcessEnv = process.env) {
  const home = daemonHome(env);
  return { home, pid: join(home, "epd.pid"), log: join(home, "epd.log") };
}

/** KEY=value lines (systemd EnvironmentFile syntax, double quotes allowed). */
export function parseEnvFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    if (eq <= 0) continue;
    let value = line.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"'))
      value = value.slice(1, -1).replace(/\\(["\\])/g, "$1");
    out[line.slice(0, eq).trim()] = value;
  }
  return out;
}

export function readEnvFile(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  try {
    return parseEnvFile(readFileSync(envFilePath(env), "utf8"));
  } catch {
    return {};
  }
}

function quote(v: string): string {
  return /^[A-Za-z0-9_./:@%+,=-]*$/.test(v) ? v : `"${v.replace(/(["\\])/g, "\\$1")}"`;
}

/** Updates keys of $EP_HOME/epd.env (undefined removes a key), keeping every other line. Mode 0600. */
export function updateEnvFile(
  updates: Record<string, string | undefined>,
  env: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const path = envFilePath(env);
  const current = readEnvFile(env);
  for (const [k, v] of Object.entries(updates)) {
    if (v === undefined) delete current[k];
    else current[k] = v;
  }
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const text =
    "# epd's environment: written by 'ep daemon up' / 'ep daemon " +
    "--booster-wasm'; read by the epd unit and by detached epd\n" +
    Object.entries(current)
      .map(([k, v]) => `${k}=${quote(v)}`)
      .join("\n") +
    "\n";
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, text, { mode: 0o600 });
  renameSync(tmp, path);
  return current;
}

/** The environment epd gets: where EP lives, which tower, which identity file, and a PATH for the runtimes. */
export function baseDaemonEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const out: Record<string, string> = { EP_HOME: epHome(env) };
  for (const k of ["EP_BASE_URL", "EP_NODE_FILE", "EP_LOG_LEVEL", "EP_SKILLS_HOME", "PATH"])
    if (env[k]) out[k] = env[k]!;
  return out;
}

export function renderUnit(opts: { node: string; epd: string; envFile: string }): string {
  return `[Unit]
Description=EP node daemon (epd)

[Service]
Type=simple
EnvironmentFile=${opts.envFile}
ExecStart=${opts.node} ${opts.epd} run $EPD_ARGS
Restart=on-failure
RestartSec=5
TimeoutStopSec=40

[Install]
WantedBy=default.target
`;
}

export function writeUnit(env: NodeJS.ProcessEnv = process.env): string {
  const path = unitPath(env);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, renderUnit({ node: process.execPath, epd: siblingBin("epd", env), envFile: envFilePath(env) }));
  return path;
}

export function systemctl(
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): { status: number; stdout: string; stderr: string } {
  const r = spawnSync("systemctl", ["--user", ...args], { encoding: "utf8", timeout: 15_000, env });
  return { status: r.status ?? 1, stdout: r.stdout ?? "", stderr: r.stderr ?? (r.error ? r.error.message : "") };
}

/** Whether a systemd user manager answers (false in most containers and CI). */
export function systemdAvailable(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.EP_NO_SYSTEMD) return false;
  return systemctl(["show-environment"], env).status === 0;
}

export function readPid(env: NodeJS.ProcessEnv = process.env): number | undefined {
  try {
    const pid = Number(readFileSync(daemonFiles(env).pid, "utf8").trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Starts epd detached (its own session), output appended to epd.log; resolves to its pid. */
export function startDetached(env: NodeJS.ProcessEnv = process.env): number {
  const files = daemonFiles(env);
  mkdirSync(files.home, { recursive: true, mode: 0o700 });
  const fileEnv = readEnvFile(env);
  const args = [siblingBin("epd", env), "run"];
  if (fileEnv.EP_BOOSTER_WASM) args.push("--booster-wasm", fileEnv.EP_BOOSTER_WASM);
  const log = openSync(files.log, "a", 0o600);
  const child = spawn(process.execPath, args, {
    detached: true,
    stdio: ["ignore", log, log],
    env: { ...env, ...fileEnv },
  });
  closeSync(log);
  child.unref();
  writeFileSync(files.pid, `${child.pid}\n`, { mode: 0o600 });
  return child.pid!;
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves to whether a process was stopped. */
export async function stopDetached(env: NodeJS.ProcessEnv = process.env, graceMs = 35_000): Promise<boolean> {
  const pid = readPid(env);
  const pidFile = daemonFiles(env).pid;
  if (pid === undefined || !alive(pid)) {
    rmSync(pidFile, { force: true });
    return false;
  }
  process.kill(pid, "SIGTERM");
  const deadline = Date.now() + graceMs;
  while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  if (alive(pid)) process.kill(pid, "SIGKILL");
  rmSync(pidFile, { force: true });
  return true;
}

export function mgmtSocketPath(env: NodeJS.ProcessEnv = process.env): string {
  return daemonSockets(env).mgmt;
}

export function socketPresent(env: NodeJS.ProcessEnv = process.env): boolean {
  return existsSync(mgmtSocketPath(env));
}
