// ep up: one machine, everything. The tower (embedded store) and a local epd as children, this
// machine registered as a node, the CLI logged in; signals go to both children.
import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants, createWriteStream, existsSync, mkdirSync, readFileSync } from "node:fs";
import { hostname } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { writeCredentials } from "../../common/credentials.js";
import { EpError } from "../../common/errors.js";
import { readNodeIdentity } from "../../common/node-identity.js";
import { cliCredentialsFile, daemonSockets, epHome, towerHome } from "../../common/paths.js";
import { AuthService } from "../../gen/ep/tower/v1/auth_pb.js";
import { createContext, type Context } from "../context.js";
import { daemonFiles, siblingBin } from "../daemon-service.js";
import { withHint } from "../fail.js";
import { fix, probeSocket } from "./doctor.js";
import { registerNode } from "./node.js";
import { tower } from "../tower.js";
import { isoOf, msOf } from "../../common/vocab.js";

/** /etc/ep/node.json when it exists or /etc/ep is writable, else $EP_HOME/node.json (EP_NODE_FILE wins). */
export function upNodeFile(env: NodeJS.ProcessEnv): string {
  if (env.EP_NODE_FILE) return env.EP_NODE_FILE;
  const system = "/etc/ep/node.json";
  if (existsSync(system)) return system;
  for (const dir of ["/etc/ep", "/etc"]) {
    if (!existsSync(dir)) continue;
    try {
      accessSync(dir, constants.W_OK);
      return dir === "/etc/ep" || !existsSync("/etc/ep") ? system : join(epHome(env), "node.json");
    } catch {
      break;
    }
  }
  return join(epHome(env), "node.json");
}

/** A one-time console login link and when it expires (24 h; `ep ui` prints a fresh one). */
export async function loginLink(ctx: Context, url: string): Promise<string> {
  const t = await tower(ctx, AuthService).createTicket({ purpose: "login" });
  const until = new Date(msOf(t.expiresAt));
  const hours = Math.round((until.getTime() - Date.now()) / 3_600_000);
  const when = until.toLocaleString(undefined, { dateStyle: "short", timeStyle: "short" });
  return (
    `${url}/ui/login#ticket=${t.ticket}\n                  (one use, valid until ` +
    `${when}${hours > 0 ? `, ${hours} h` : ""}; 'ep ui' prints a fresh link)`
  );
}

const LEVELS: Record<string, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/**
 * One of epd's JSON log lines as people read it ("epd warn  link state  state=connected"), or
 * undefined when its level is below `minLevel`. A line that is not JSON is kept as it is.
 */
export function humanLog(line: string, minLevel = "debug"): string | undefined {
  if (!line.startsWith("{")) return line;
  try {
    const { ts: _ts, level, msg, ...fields } = JSON.parse(line) as Record<string, unknown>;
    if ((LEVELS[String(level)] ?? LEVELS.error) < (LEVELS[minLevel] ?? LEVELS.warn)) return undefined;
    const rest = Object.entries(fields)
      .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
      .join(" ");
    return `epd ${String(level).padEnd(5)} ${msg}${rest ? `  ${rest}` : ""}`;
  } catch {
    return line;
  }
}

async function healthy(url: string): Promise<boolean> {
  try {
    return (await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) })).ok;
  } catch {
    return false;
  }
}

/** ep ui: the console's address and a fresh login link, with the CLI's credentials. */
async function ui(ctx: Context): Promise<number> {
  const url = ctx.url();
  const t = await tower(ctx, AuthService).createTicket({ purpose: "login" });
  const link = `${url}/ui/login#ticket=${t.ticket}`;
  ctx.out(
    ctx.json
      ? JSON.stringify({ console: `${url}/ui/`, login_link: link, expires_at: isoOf(t.expiresAt) })
      : `console:        ${url}/ui/\none-time login: ${link}\n                (one use, valid until ` +
          `${new Date(msOf(t.expiresAt)).toLocaleString(undefined, { dateStyle: "short", timeStyle: "short" })})`,
  );
  return 0;
}

export async function run(ctx: Context): Promise<number> {
  if (ctx.spec.path[0] === "ui") return ui(ctx);
  const env = ctx.env;
  const listen = ctx.str("listen") ?? "127.0.0.1:8008";
  const m = /^(.*):(\d+)$/.exec(listen);
  if (!m)
    throw new EpError("invalid_argument", `--listen must be host:port (got ${JSON.stringify(listen)})`, {
      field: "listen",
    });
  const host = m[1] === "127.0.0.1" || m[1] === "0.0.0.0" || m[1] === "" ? "localhost" : m[1];
  const url = `http://${host}:${m[2]}`;
  if (await healthy(url))
    throw withHint(
      new EpError("already_exists", `a tower already answers at ${url}`),
      "stop it first, or use 'ep up --listen 127.0.0.1:<port>'",
    );

  // The terminal shows warnings (or EP_LOG_LEVEL); epd.log gets info and up, as under systemd, so
  // 'ep daemon logs' has something to show when all is well (at "warn" a healthy epd wrote nothing).
  const terminalLevel = env.EP_LOG_LEVEL ?? "warn";
  const childEnv: NodeJS.ProcessEnv = { ...env, EP_HOME: epHome(env), EP_LOG_LEVEL: terminalLevel };
  mkdirSync(epHome(env), { recursive: true, mode: 0o700 });
  fix(env); // what 'ep system doctor' expects of a home: skills folder, local agent id
  const children: ChildProcess[] = [];
  const towerChild = spawn(process.execPath, [siblingBin("ep-tower", env), "--listen", listen], {
    env: childEnv,
    stdio: ["ignore", "ignore", "pipe"],
    detached: true,
  });
  children.push(towerChild);
  let towerErr = "";
  towerChild.stderr!.on("data", (d: Buffer) => {
    towerErr = (towerErr + d.toString()).slice(-4000);
    process.stderr.write(d);
  });
  const exited = (c: ChildProcess) =>
    new Promise<number>((res) =>
      c.exitCode !== null || c.signalCode !== null
        ? res(c.exitCode ?? 128)
        : c.once("exit", (code, sig) => res(code ?? (sig ? 128 : 1))),
    );
  const alive = (c: ChildProcess) => c.exitCode === null && c.signalCode === null;
  /** Stops one child: SIGTERM, then SIGKILL after `graceMs`. */
  const stopChild = async (c: ChildProcess, graceMs: number) => {
    if (!alive(c)) return;
    c.kill("SIGTERM");
    const timer = setTimeout(() => alive(c) && c.kill("SIGKILL"), graceMs);
    await exited(c);
    clearTimeout(timer);
  };
  // Children run in their own process groups, so Ctrl-C reaches only this process, which stops
  // them in order: epd first (its runs end and are reported, retryably, while the tower is still
  // there to hear it), then the tower. No "link failed" or "retrying" noise, no orphans.
  let stopping: Promise<void> | undefined;
  const stopAll = () =>
    (stopping ??= (async () => {
      const [towerProc, ...rest] = children;
      for (const c of rest.reverse()) await stopChild(c, 6000);
      await stopChild(towerProc, 5000);
    })());
  const onSignal = () => {
    if (stopping) return;
    process.stderr.write("\nstopping… (epd, then the tower)\n");
    void stopAll().then(() => process.stderr.write("stopped\n"));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  const towerExit = exited(towerChild);

  try {
    const deadline = Date.now() + 30_000;
    while (!(await healthy(url))) {
      if (towerChild.exitCode !== null)
        throw new EpError(
          "unavailable",
          `ep-tower exited (${towerChild.exitCode}) before it was ` +
            `healthy: ${towerErr.trim().split("\n").slice(-3).join(" | ")}`,
        );
      if (Date.now() > deadline) throw new EpError("unavailable", `ep-tower did not answer ${url}/healthz within 30 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const token = readFileSync(join(towerHome(env), "admin.token"), "utf8").trim();
    await writeCredentials({ url, token }, cliCredentialsFile(env));
    const towerCtx = createContext(ctx.spec, [], { url, token }, env);

    const nodePath = upNodeFile(env);
    let registered = false;
    let reuse = false;
    try {
      const id = await readNodeIdentity(nodePath);
      reuse = id.tower_url === url;
    } catch {
      reuse = false;
    }
    if (!reuse) {
      mkdirSync(dirname(nodePath), { recursive: true });
      await registerNode(towerCtx, hostname().replace(/[^A-Za-z0-9.-]/g, "-") || "localhost", nodePath);
      registered = true;
    }

    const lines = [`EP is up at ${url}`, `  console:        ${url}/ui/`];
    try {
      lines.push(`  one-time login: ${await loginLink(towerCtx, url)}`);
    } catch (err) {
      lines.push(`  (no login link: ${(err as Error).message})`);
    }
    lines.push(
      `  node identity:  ${nodePath}${registered ? " (registered now)" : ""}`,
      `  CLI logged in:  ${cliCredentialsFile(env)}`,
    );

    if (!ctx.opts["no-daemon"]) {
      const epd = siblingBin("epd", env);
      const daemonChild = spawn(process.execPath, [epd, "run", "--backend-url", url], {
        // Ctrl-C should not wait 30 s for a running task: runs get 2 s, then end retryably
        env: {
          ...childEnv,
          EP_LOG_LEVEL: env.EP_LOG_LEVEL ?? "info",
          EP_NODE_FILE: nodePath,
          EP_BASE_URL: url,
          EP_SHUTDOWN_GRACE_MS: env.EP_SHUTDOWN_GRACE_MS ?? "2000",
        },
        stdio: ["ignore", "pipe", "pipe"],
        detached: true,
      });
      // epd's log goes where 'ep daemon logs' reads it (as written) and to this terminal (for people)
      mkdirSync(dirname(daemonFiles(env).log), { recursive: true, mode: 0o700 });
      const logFile = createWriteStream(daemonFiles(env).log, { flags: "a", mode: 0o600 });
      logFile.on("error", (err) => process.stderr.write(`ep: cannot write ${daemonFiles(env).log}: ${err.message}\n`));
      for (const stream of [daemonChild.stdout!, daemonChild.stderr!]) {
        stream.pipe(logFile, { end: false });
        createInterface({ input: stream, crlfDelay: Infinity }).on("line", (line) => {
          const shown = humanLog(line, terminalLevel);
          if (shown !== undefined) process.stderr.write(shown + "\n");
        });
      }
      daemonChild.once("exit", () => setTimeout(() => logFile.end(), 50));
      children.push(daemonChild);
      // the tour's next command talks to epd: say "up" once its management socket answers
      const ready = await daemonReady(daemonSockets(env).mgmt, daemonChild, 20_000);
      lines.push(
        `  daemon:         epd (pid ${daemonChild.pid}), sockets in ${join(epHome(env), "epd")}` +
          `${ready ? "" : " (not answering yet; 'ep daemon status' tells when it does)"}`,
      );
      void exited(daemonChild).then((code) => {
        if (code !== 0 && towerChild.exitCode === null)
          process.stderr.write(`ep: epd exited with ${code}; the tower keeps running (restart epd with 'epd run')\n`);
      });
    }
    lines.push("", "Ctrl-C stops everything.");
    ctx.out(lines.join("\n"));
  } catch (err) {
    await stopAll();
    throw err;
  }
  const code = await towerExit;
  await stopAll();
  await Promise.all(children.map(exited));
  return stopping && code !== 0 ? 0 : code;
}

/** Whether epd's management socket answers within `timeoutMs` (false at once when epd exits). */
async function daemonReady(socket: string, child: ChildProcess, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && child.exitCode === null && child.signalCode === null) {
    if ((await probeSocket(socket, 500)) === "live") return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}
