// ep daemon [--booster-wasm <path>] | up | down | status | logs.
import { spawn } from "node:child_process";
import { existsSync, openSync, readFileSync, readSync, closeSync, statSync, watchFile, unwatchFile } from "node:fs";
import { resolve } from "node:path";
import { EpError } from "../../common/errors.js";
import { ExitCode, UsageError, type Context } from "../context.js";
import * as svc from "../daemon-service.js";
import { withHint } from "../fail.js";
import { groupHelp } from "../help.js";
import { mgmtCall } from "../mgmt-client.js";
import { mgmtJson } from "../mgmt-json.js";
import { json, kv, type Row } from "../output.js";

/** Checks the booster file and records it in epd.env (EP_BOOSTER_WASM and the unit's EPD_ARGS). */
export function recordBooster(path: string, env: NodeJS.ProcessEnv): string {
  const abs = resolve(path);
  let head: Buffer;
  try {
    head = readFileSync(abs).subarray(0, 4);
  } catch (err) {
    throw new EpError(
      "invalid_argument",
      `--booster-wasm ${abs}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
      { field: "--booster-wasm" },
    );
  }
  if (!head.equals(Buffer.from([0, 0x61, 0x73, 0x6d])))
    throw new EpError("invalid_argument", `--booster-wasm ${abs}: not a WebAssembly module (no \\0asm header)`, {
      field: "--booster-wasm",
    });
  if (/\s/.test(abs))
    throw new EpError(
      "invalid_argument",
      `--booster-wasm ${abs}: the path must not contain spaces (it is passed on epd's command line)`,
      { field: "--booster-wasm" },
    );
  svc.updateEnvFile({ EP_BOOSTER_WASM: abs, EPD_ARGS: `--booster-wasm ${abs}` }, env);
  return abs;
}

async function waitForSocket(env: NodeJS.ProcessEnv, pid: number | undefined, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (pid !== undefined && !svc.alive(pid)) return false;
    try {
      await mgmtCall("daemon.status", {}, { env, timeoutMs: 1000 });
      return true;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return false;
}

function tail(path: string, lines: number): string {
  try {
    const text = readFileSync(path, "utf8");
    return text
      .split("\n")
      .slice(-lines - 1)
      .join("\n");
  } catch {
    return "";
  }
}

async function up(ctx: Context): Promise<number> {
  const env = ctx.env;
  const booster = ctx.str("booster-wasm");
  if (booster) recordBooster(booster, env);
  svc.updateEnvFile(svc.baseDaemonEnv(env), env);
  const envFile = svc.envFilePath(env);
  const useSystemd = !ctx.opts["no-systemd"] && (ctx.opts["unit-only"] || svc.systemdAvailable(env));
  if (useSystemd) {
    const unit = svc.writeUnit(env);
    if (ctx.opts["unit-only"]) {
      ctx.out(
        ctx.json
          ? json({ unit, env_file: envFile, started: false })
          : `wrote ${unit} and ${envFile}; start it with 'systemctl --user enable --now ${svc.UNIT_NAME}'`,
      );
      return 0;
    }
    for (const args of [["daemon-reload"], ["enable", svc.UNIT_NAME], ["restart", svc.UNIT_NAME]]) {
      const r = svc.systemctl(args, env);
      if (r.status !== 0)
        throw withHint(
          new EpError("unavailable", `systemctl --user ${args.join(" ")} failed: ${r.stderr.trim()}`),
          "see 'journalctl --user -u epd' or use 'ep daemon up --no-systemd'",
        );
    }
    const ready = await waitForSocket(env, undefined, 15_000);
    ctx.out(
      ctx.json
        ? json({ manager: "systemd", unit, env_file: envFile, ready })
        : `epd started as the systemd user service ${svc.UNIT_NAME} ` +
            `(${unit})${ready ? "; mgmt.sock answers" : "; not answering yet, see 'ep daemon logs'"}`,
    );
    return ready ? 0 : 1;
  }
  const running = svc.readPid(env);
  if (running !== undefined && svc.alive(running)) {
    ctx.out(
      ctx.json
        ? json({ manager: "process", pid: running, already_running: true })
        : `epd is already running (pid ${running})`,
    );
    return 0;
  }
  const files = svc.daemonFiles(env);
  const pid = svc.startDetached(env);
  const ready = await waitForSocket(env, pid, 15_000);
  if (!ready) {
    const log = tail(files.log, 15);
    throw withHint(
      new EpError(
        "unavailable",
        `epd (pid ${pid}) did not come up${svc.alive(pid) ? " within 15 s" : ", it exited"}; ` +
          `last lines of ${files.log}:\n${log}`,
      ),
      "fix what the log says (often: no node identity; run 'ep agent node register --hostname <h>')",
    );
  }
  ctx.out(
    ctx.json
      ? json({ manager: "process", pid, pid_file: files.pid, log: files.log, env_file: envFile })
      : `epd started detached (pid ${pid}); pid file ${files.pid}, log ${files.log}`,
  );
  return 0;
}

async function down(ctx: Context): Promise<number> {
  const env = ctx.env;
  const stopped = await svc.stopDetached(env);
  let unitStopped = false;
  if (!stopped && svc.systemdAvailable(env)) {
    const active = svc.systemctl(["is-active", svc.UNIT_NAME], env).stdout.trim() === "active";
    if (active) {
      const r = svc.systemctl(["stop", svc.UNIT_NAME], env);
      if (r.status !== 0)
        throw new EpError("unavailable", `systemctl --user stop ${svc.UNIT_NAME} failed: ${r.stderr.trim()}`);
      unitStopped = true;
    }
  }
  const any = stopped || unitStopped;
  ctx.out(
    ctx.json
      ? json({ stopped: any, manager: stopped ? "process" : unitStopped ? "systemd" : null })
      : any
        ? "epd stopped"
        : "epd was not running",
  );
  return 0;
}

async function status(ctx: Context): Promise<number> {
  const env = ctx.env;
  const pid = svc.readPid(env);
  const out: Row = { socket: svc.mgmtSocketPath(env) };
  if (pid !== undefined) Object.assign(out, { manager: "process", pid, running: svc.alive(pid) });
  else if (svc.systemdAvailable(env)) {
    const state = svc.systemctl(["is-active", svc.UNIT_NAME], env).stdout.trim();
    Object.assign(out, { manager: "systemd", unit: svc.UNIT_NAME, unit_state: state, running: state === "active" });
  }
  let answer: Row | undefined;
  try {
    answer = await mgmtCall<Row>("daemon.status", {}, { env, timeoutMs: 5000 });
    Object.assign(out, { running: true, ...answer });
  } catch (err) {
    out.running = false;
    out.error = (err as Error).message;
  }
  if (ctx.json) {
    const local: Row = {
      socket: out.socket,
      manager: out.manager,
      pid: out.pid,
      unit: out.unit,
      unit_state: out.unit_state,
      running: out.running,
      error: out.error,
    };
    for (const k of Object.keys(local)) if (local[k] === undefined) delete local[k];
    ctx.out(json(answer ? { ...local, ...mgmtJson("daemon.status", answer) } : local));
  } else if (out.running)
    ctx.out(
      kv({ ...out, agents: ((out.agents as Row[]) ?? []).length }, [
        "nodeId",
        "hostname",
        "backendUrl",
        "link",
        "takeTasks",
        "version",
        "startedAt",
        "runningTasks",
        "agents",
        "booster",
        "manager",
        "pid",
        "socket",
      ]),
    );
  else ctx.out(`epd is not running (${out.error})`);
  if (!out.running) throw new ExitCode(7);
  return 0;
}

async function logs(ctx: Context): Promise<number> {
  const env = ctx.env;
  const raw = ctx.str("lines") ?? "100";
  const lines = Number(raw);
  if (!Number.isInteger(lines) || lines <= 0)
    throw new UsageError(`--lines must be a positive integer (got ${JSON.stringify(raw)})`);
  const follow = ctx.opts.follow === true;
  const files = svc.daemonFiles(env);
  // the journal while the unit runs, or when there is no log file; otherwise the file that
  // 'ep daemon up' without systemd and 'ep up' write (an old file must not hide a running unit)
  const unitActive = () => svc.systemctl(["is-active", svc.UNIT_NAME], env).stdout.trim() === "active";
  if (svc.readPid(env) === undefined && svc.systemdAvailable(env) && (!existsSync(files.log) || unitActive())) {
    const child = spawn(
      "journalctl",
      ["--user", "-u", svc.UNIT_NAME, "-n", String(lines), ...(follow ? ["-f"] : []), "--no-pager"],
      { stdio: "inherit" },
    );
    return new Promise((res) => child.on("exit", (code) => res(code ?? 1)));
  }
  let size: number;
  try {
    size = statSync(files.log).size;
  } catch {
    throw withHint(
      new EpError("not_found", `no log at ${files.log}`),
      "epd writes it when started with 'ep daemon up' without systemd",
    );
  }
  process.stdout.write(tail(files.log, lines));
  if (!follow) return 0;
  return new Promise(() => {
    watchFile(files.log, { interval: 250 }, (cur) => {
      if (cur.size < size) size = 0;
      if (cur.size === size) return;
      const fd = openSync(files.log, "r");
      const buf = Buffer.alloc(cur.size - size);
      readSync(fd, buf, 0, buf.length, size);
      closeSync(fd);
      size = cur.size;
      process.stdout.write(buf);
    });
    process.once("SIGINT", () => {
      unwatchFile(files.log);
      process.exit(0);
    });
  });
}

export async function run(ctx: Context): Promise<number> {
  switch (ctx.spec.path[1]) {
    case "up":
      return up(ctx);
    case "down":
      return down(ctx);
    case "status":
      return status(ctx);
    case "logs":
      return logs(ctx);
    default: {
      const booster = ctx.str("booster-wasm");
      if (!booster) {
        process.stderr.write(groupHelp(["daemon"]));
        throw new UsageError(
          "say what to do: a subcommand (up, down, status, logs, agent enroll) or --booster-wasm <path>",
        );
      }
      const abs = recordBooster(booster, ctx.env);
      ctx.out(
        ctx.json
          ? json({ booster_wasm: abs, env_file: svc.envFilePath(ctx.env) })
          : `recorded booster ${abs} in ${svc.envFilePath(ctx.env)}; ` +
              `restart epd to load it ('ep daemon down && ep daemon up')`,
      );
      return 0;
    }
  }
}
