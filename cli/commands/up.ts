// ep up: one machine, everything. The tower (embedded store) and a local epd as children, this
// machine registered as a node, the CLI logged in; signals go to both children.
import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants, existsSync, mkdirSync, readFileSync } from "node:fs";
import { hostname } from "node:os";
import { dirname, join } from "node:path";
import { writeCredentials } from "../../common/credentials.js";
import { EpError } from "../../common/errors.js";
import { readNodeIdentity } from "../../common/node-identity.js";
import { cliCredentialsFile, epHome, towerHome } from "../../common/paths.js";
import { AuthService } from "../../gen/ep/tower/v1/auth_pb.js";
import { createContext, type Context } from "../context.js";
import { siblingBin } from "../daemon-service.js";
import { withHint } from "../fail.js";
import { registerNode } from "./node.js";
import { tower } from "../tower.js";

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

async function healthy(url: string): Promise<boolean> {
  try {
    return (await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) })).ok;
  } catch {
    return false;
  }
}

export async function run(ctx: Context): Promise<number> {
  const env = ctx.env;
  const listen = ctx.str("listen") ?? "127.0.0.1:8008";
  const m = /^(.*):(\d+)$/.exec(listen);
  if (!m) throw new EpError("invalid_argument", `--listen must be host:port (got ${JSON.stringify(listen)})`, { field: "listen" });
  const host = m[1] === "127.0.0.1" || m[1] === "0.0.0.0" || m[1] === "" ? "localhost" : m[1];
  const url = `http://${host}:${m[2]}`;
  if (await healthy(url)) throw withHint(new EpError("already_exists", `a tower already answers at ${url}`), "stop it first, or use 'ep up --listen 127.0.0.1:<port>'");

  const childEnv: NodeJS.ProcessEnv = { ...env, EP_HOME: epHome(env), EP_LOG_LEVEL: env.EP_LOG_LEVEL ?? "warn" };
  mkdirSync(epHome(env), { recursive: true, mode: 0o700 });
  const children: ChildProcess[] = [];
  const towerChild = spawn(process.execPath, [siblingBin("ep-tower", env), "--listen", listen], { env: childEnv, stdio: ["ignore", "ignore", "pipe"] });
  children.push(towerChild);
  let towerErr = "";
  towerChild.stderr!.on("data", (d: Buffer) => {
    towerErr = (towerErr + d.toString()).slice(-4000);
    process.stderr.write(d);
  });
  const stopAll = (signal: NodeJS.Signals) => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill(signal);
  };
  process.on("SIGINT", () => stopAll("SIGINT"));
  process.on("SIGTERM", () => stopAll("SIGTERM"));
  const exited = (c: ChildProcess) => new Promise<number>((res) => (c.exitCode !== null ? res(c.exitCode) : c.once("exit", (code, sig) => res(code ?? (sig ? 128 : 1)))));
  const towerExit = exited(towerChild);

  try {
    const deadline = Date.now() + 30_000;
    while (!(await healthy(url))) {
      if (towerChild.exitCode !== null) throw new EpError("unavailable", `ep-tower exited (${towerChild.exitCode}) before it was healthy: ${towerErr.trim().split("\n").slice(-3).join(" | ")}`);
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
      const t = await tower(towerCtx, AuthService).createTicket({ purpose: "login" });
      lines.push(`  one-time login: ${url}/ui/login#ticket=${t.ticket}`);
    } catch (err) {
      lines.push(`  (no login link: ${(err as Error).message})`);
    }
    lines.push(`  node identity:  ${nodePath}${registered ? " (registered now)" : ""}`, `  CLI logged in:  ${cliCredentialsFile(env)}`);

    if (!ctx.opts["no-daemon"]) {
      const epd = siblingBin("epd", env);
      const daemonChild = spawn(process.execPath, [epd, "run", "--backend-url", url], { env: { ...childEnv, EP_NODE_FILE: nodePath, EP_BASE_URL: url }, stdio: ["ignore", "inherit", "inherit"] });
      children.push(daemonChild);
      lines.push(`  daemon:         epd (pid ${daemonChild.pid}), sockets in ${join(epHome(env), "epd")}`);
      void exited(daemonChild).then((code) => {
        if (code !== 0 && towerChild.exitCode === null) process.stderr.write(`ep: epd exited with ${code}; the tower keeps running (restart epd with 'epd run')\n`);
      });
    }
    lines.push("", "Ctrl-C stops everything.");
    ctx.out(lines.join("\n"));
  } catch (err) {
    stopAll("SIGTERM");
    await Promise.all(children.map(exited));
    throw err;
  }
  const code = await towerExit;
  stopAll("SIGTERM");
  await Promise.all(children.map(exited));
  return code;
}
