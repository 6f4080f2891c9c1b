// ep system doctor [--fix]: one entry per check {check, ok, level, detail, hint}; exit 1 when an
// error-level check fails. Warnings (a vendor CLI that is not installed) do not fail the run.
import { randomBytes } from "node:crypto";
import { accessSync, constants, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import net from "node:net";
import { basename, delimiter, join } from "node:path";
import { readNodeIdentity } from "../../common/node-identity.js";
import { daemonHome, daemonSockets, epHome, nodeFile } from "../../common/paths.js";
import { runtimeCommands, type RuntimeCommandKind } from "../../common/runtime-commands.js";
import type { Context } from "../context.js";
import { mgmtCall } from "../mgmt-client.js";
import { json } from "../output.js";

export interface CheckResult {
  check: string;
  ok: boolean;
  /** how bad a failure is; "ok" when the check passed (never ok: true with level "error") */
  level: "error" | "warn" | "ok";
  detail: string;
  hint?: string;
}

/**
 * The binaries epd would start: each runtime kind's command from $EP_HOME/epd/runtimes.toml over the
 * defaults (common/runtime-commands.ts), grouped by command, plus tmux for muxhost_hosted.
 * Missing bash (shell runtime, cron bash dispatch) is an error; a missing vendor CLI a warning.
 */
function runtimeChecks(env: NodeJS.ProcessEnv): CheckResult[] {
  const out: CheckResult[] = [];
  const file = join(daemonHome(env), "runtimes.toml");
  let text: string | undefined;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT")
      out.push({
        check: "runtimes_config",
        ok: false,
        level: "error",
        detail: `${file}: cannot read: ${(err as Error).message}`,
        hint: "make it readable by the daemon's user",
      });
  }
  let commands = runtimeCommands(undefined);
  if (text !== undefined) {
    try {
      commands = runtimeCommands(text, file);
      out.push({ check: "runtimes_config", ok: true, level: "error", detail: `${file} read` });
    } catch (err) {
      out.push({
        check: "runtimes_config",
        ok: false,
        level: "error",
        detail: (err as Error).message,
        hint: "fix the file (docs/runtimes.md): epd refuses to start with it; the defaults are checked below",
      });
    }
  }
  const byCommand = new Map<string, RuntimeCommandKind[]>();
  for (const [kind, command] of Object.entries(commands) as [RuntimeCommandKind, string][])
    byCommand.set(command, [...(byCommand.get(command) ?? []), kind]);
  const binaries: { command: string; uses: string; level: "error" | "warn"; kinds: string[] }[] = [...byCommand].map(
    ([command, kinds]) => ({
      command,
      kinds,
      uses:
        `${kinds.join(" / ")} ` +
        `runtime${kinds.length > 1 ? "s" : ""}${kinds.includes("shell") ? ", cron bash dispatch" : ""}`,
      level: kinds.includes("shell") ? "error" : "warn",
    }),
  );
  binaries.push({ command: "tmux", kinds: [], uses: "muxhost_hosted runtime", level: "warn" });
  const bwrap = onPath("bwrap", env);
  out.push(confinementCheck(bwrap, bwrap ?? `bwrap is not on PATH (${env.PATH ?? ""})`));
  for (const b of binaries) {
    const found = b.command.includes("/") ? (executable(b.command) ? b.command : undefined) : onPath(b.command, env);
    const where = b.command.includes("/") ? `${b.command} is not an executable file` : `${b.command} is not on PATH`;
    out.push({
      check: `runtime_${basename(b.command)}`,
      ok: Boolean(found),
      level: b.level,
      detail: found ? `${found} (${b.uses})` : `${where} (${b.uses} unavailable)`,
      hint: found
        ? undefined
        : b.kinds.length
          ? `install ${basename(b.command)} or set [${b.kinds[0]}] command in ${file}`
          : `install ${b.command}`,
    });
  }
  return out;
}

/**
 * bubblewrap: every agent run is confined with it (docs/runtimes.md "Permissions"); without it they refuse to start.
 */
function confinementCheck(found: string | undefined, detail: string): CheckResult {
  return found
    ? {
        check: "confinement",
        ok: true,
        level: "warn",
        detail: `${detail} (bubblewrap: agent runs are confined to their workspace)`,
      }
    : {
        check: "confinement",
        ok: false,
        level: "warn",
        detail: `${detail}: agent runs (permission workspace, ask, read-only) refuse to start without it`,
        hint:
          "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap), " +
          'or set permission = "unconfined" for a runtime in runtimes.toml',
      };
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

export const MAX_SKEW_MS = 5_000;

export function skillsHome(env: NodeJS.ProcessEnv): string {
  return env.EP_SKILLS_HOME || join(epHome(env), "skills");
}

export function onPath(bin: string, env: NodeJS.ProcessEnv): string | undefined {
  for (const dir of (env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, bin);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // next
    }
  }
  return undefined;
}

/** "live" when something answers, "stale" when the file is there but nobody listens, "missing". */
export function probeSocket(path: string, timeoutMs = 2000): Promise<"live" | "stale" | "missing"> {
  if (!existsSync(path)) return Promise.resolve("missing");
  return new Promise((resolve) => {
    const s = net.connect(path);
    const t = setTimeout(() => (s.destroy(), resolve("live")), timeoutMs);
    s.once("connect", () => (clearTimeout(t), s.destroy(), resolve("live")));
    s.once(
      "error",
      (err: NodeJS.ErrnoException) => (
        clearTimeout(t), resolve(err.code === "ECONNREFUSED" || err.code === "ENOTSOCK" ? "stale" : "live")
      ),
    );
  });
}

async function timedFetch(url: string, init: RequestInit & { timeoutMs?: number } = {}): Promise<Response> {
  const ctl = new AbortController();
  const t = setTimeout(() => ctl.abort(), init.timeoutMs ?? 5000);
  try {
    return await fetch(url, { ...init, signal: ctl.signal });
  } finally {
    clearTimeout(t);
  }
}

/** Creates what a healthy home has (ep_home, skills_home, agent_id); `ep up` runs it too. */
export function fix(env: NodeJS.ProcessEnv): string[] {
  const done: string[] = [];
  for (const dir of [epHome(env), skillsHome(env)]) {
    if (!existsSync(dir)) {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      done.push(`created ${dir}`);
    }
  }
  const idFile = join(epHome(env), "agent_id");
  if (!existsSync(idFile)) {
    writeFileSync(idFile, `agt_local_${randomBytes(8).toString("hex")}\n`, { mode: 0o644, flag: "wx" });
    done.push(`seeded ${idFile}`);
  }
  return done;
}

export async function runChecks(ctx: Context): Promise<CheckResult[]> {
  const env = ctx.env;
  const url = ctx.url();
  const token = ctx.token();
  const auth: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  const results: CheckResult[] = [
    ...localSetup(env),
    ...(await towerChecks(url, auth)),
    ...(await nodeChecks(env, url)),
    ...(await daemonChecks(env)),
    ...(await runtimeResults(env)),
  ];
  // throttling seen by the local fan-out
  if (env.EP_FANOUT_LISTEN) results.push(await fanoutCheck(env.EP_FANOUT_LISTEN));
  return results.map((r) => (r.ok ? { ...r, level: "ok" as const } : r));
}

/** The EP home, the skills home and the local agent id. */
function localSetup(env: NodeJS.ProcessEnv): CheckResult[] {
  const results: CheckResult[] = [];
  const add = (r: CheckResult) => results.push(r);
  for (const [check, dir] of [
    ["ep_home", epHome(env)],
    ["skills_home", skillsHome(env)],
  ] as const) {
    const ok = existsSync(dir);
    add({
      check,
      ok,
      level: "error",
      detail: ok ? dir : `${dir} does not exist`,
      hint: ok ? undefined : "run 'ep system doctor --fix'",
    });
  }
  const idFile = join(epHome(env), "agent_id");
  const agentId = existsSync(idFile) ? readFileSync(idFile, "utf8").trim() : "";
  add({
    check: "agent_id",
    ok: Boolean(agentId),
    level: "error",
    detail: agentId ? `${agentId} (${idFile})` : `${idFile} is missing`,
    hint: agentId ? undefined : "run 'ep system doctor --fix' to seed a stable agent id for local swarms",
  });
  return results;
}

/** The tower: health, clock skew, the tool catalog and the event stream. */
async function towerChecks(url: string, auth: Record<string, string>): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  const add = (r: CheckResult) => results.push(r);
  let towerUp = false;
  try {
    const started = Date.now();
    const res = await timedFetch(`${url}/healthz`);
    const rtt = Date.now() - started;
    towerUp = res.ok;
    add({
      check: "tower_health",
      ok: res.ok,
      level: "error",
      detail: `${url}/healthz → ${res.status} in ${rtt} ms`,
      hint: res.ok ? undefined : "the tower answers but is not healthy; see its log",
    });
    const date = res.headers.get("date");
    if (date) {
      // the Date header is truncated to the second: its middle is the best estimate
      const skew = Date.parse(date) + 500 + rtt / 2 - Date.now();
      const ok = Math.abs(skew) <= MAX_SKEW_MS;
      add({
        check: "clock_skew",
        ok,
        level: "error",
        detail:
          `local clock is ${Math.round(-skew)} ms ` + `${skew > 0 ? "behind" : "ahead of"} the tower (±1 s resolution)`,
        hint: ok ? undefined : "sync the clock (timedatectl set-ntp true / chrony); leases and tokens depend on it",
      });
    }
  } catch (err) {
    const e = err as Error;
    const why = e.cause ? String((e.cause as Error).message ?? e.cause) : e.message;
    add({
      check: "tower_health",
      ok: false,
      level: "error",
      detail: `cannot reach ${url}/healthz: ${why}`,
      hint: "start the tower ('ep up' or 'ep-tower') or point --url / EP_BASE_URL at it",
    });
  }
  if (towerUp) {
    try {
      const res = await timedFetch(`${url}/mcp/tools`, { headers: auth });
      let detail = `GET /mcp/tools → ${res.status}`;
      if (res.ok) {
        const body = (await res.json()) as { tools?: unknown[] };
        detail += `, ${body.tools?.length ?? 0} tools`;
      }
      add({
        check: "tools",
        ok: res.ok,
        level: "error",
        detail,
        hint: res.ok
          ? undefined
          : res.status === 401 || res.status === 403
            ? "log in with 'ep login --url <url> --token <token>' or set EP_TOKEN"
            : "the tower does not serve the tool catalog; upgrade it",
      });
    } catch (err) {
      add({
        check: "tools",
        ok: false,
        level: "error",
        detail: `GET /mcp/tools failed: ${(err as Error).message}`,
        hint: "see the tower log",
      });
    }
    try {
      const ctl = new AbortController();
      const t = setTimeout(() => ctl.abort(), 5000);
      const res = await fetch(`${url}/events/stream`, {
        headers: { ...auth, accept: "text/event-stream" },
        signal: ctl.signal,
      });
      clearTimeout(t);
      const type = res.headers.get("content-type") ?? "";
      const ok = res.ok && type.startsWith("text/event-stream");
      ctl.abort();
      add({
        check: "matrix",
        ok,
        level: "error",
        detail: `GET /events/stream → ${res.status} ${type}`,
        hint: ok
          ? undefined
          : res.status === 401 || res.status === 403
            ? "log in with 'ep login' or set EP_TOKEN"
            : "the tower's event stream is not available; upgrade it or see its log",
      });
    } catch (err) {
      add({
        check: "matrix",
        ok: false,
        level: "error",
        detail: `GET /events/stream failed: ${(err as Error).message}`,
        hint: "see the tower log",
      });
    }
  } else {
    for (const check of ["tools", "matrix"])
      add({
        check,
        ok: false,
        level: "error",
        detail: "not checked: the tower is unreachable",
        hint: "fix tower_health first",
      });
  }
  return results;
}

/** This machine as a node: its identity file and the domains the tower says it serves. */
async function nodeChecks(env: NodeJS.ProcessEnv, url: string): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  const add = (r: CheckResult) => results.push(r);
  const idPath = nodeFile(env);
  try {
    const id = await readNodeIdentity(idPath);
    add({
      check: "node_identity",
      ok: true,
      level: "error",
      detail: `${idPath}: node ${id.node_id} (${id.hostname}) at ${id.tower_url}`,
    });
    // the domains it serves, as the tower has them (its own token may read its own node)
    try {
      const res = await fetch(`${url}/ep.tower.v1.NodeService/GetNode`, {
        method: "POST",
        headers: { authorization: `Bearer ${id.token}`, "content-type": "application/json" },
        body: JSON.stringify({ nodeId: id.node_id }),
        signal: AbortSignal.timeout(3000),
      });
      const body = (await res.json()) as { node?: { domains?: string[] }; message?: string };
      const domains = body.node?.domains ?? [];
      if (res.ok)
        add({
          check: "node_domains",
          ok: true,
          level: "warn",
          detail:
            domains.length && !domains.includes("*")
              ? `serves ${domains.join(", ")}`
              : "serves * (all domains) — narrow it with 'ep node domains set'",
        });
      else
        add({
          check: "node_domains",
          ok: false,
          level: "warn",
          detail: `GetNode → ${res.status}: ${body.message ?? ""}`,
          hint: "register the node again if the tower no longer knows it",
        });
    } catch (err) {
      add({
        check: "node_domains",
        ok: false,
        level: "warn",
        detail: `could not ask the tower: ${(err as Error).message}`,
      });
    }
  } catch (err) {
    add({
      check: "node_identity",
      ok: false,
      level: "error",
      detail: (err as Error).message,
      hint: "register this machine: 'ep agent node register --hostname <h>' (EP_NODE_FILE picks the path)",
    });
  }
  return results;
}

const SOCKET_STATES = {
  live: "a daemon answers",
  stale: "stale socket (nobody listens; a daemon died and left it)",
  missing: "no socket (the daemon is not running)",
} as const;

/**
 * The daemon: its sockets, and cron.toml as it loaded it (errors mean no cron job runs; warnings are ignored fields).
 */
async function daemonChecks(env: NodeJS.ProcessEnv): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  const add = (r: CheckResult) => results.push(r);
  const sockets = daemonSockets(env);
  for (const [name, path, required] of [
    ["mgmt", sockets.mgmt, true],
    ["secrets", sockets.secrets, false],
    ["attach", sockets.attach, false],
  ] as const) {
    const state = await probeSocket(path);
    if (state === "missing" && !required) continue;
    const ok = state === "live";
    add({
      check: `socket_${name}`,
      ok,
      level: "error",
      detail: `${path}: ${SOCKET_STATES[state]}`,
      hint: ok
        ? undefined
        : state === "stale"
          ? `start the daemon ('ep daemon up'), which removes it, or delete ${path}`
          : "start the daemon with 'ep daemon up'",
    });
  }

  // cron.toml as the daemon loaded it: errors mean no cron job runs; warnings are ignored fields
  if ((await probeSocket(sockets.mgmt)) === "live") {
    try {
      const res = await mgmtCall<{
        problems?: { level: string; line: number; job?: string; field?: string; message: string }[];
      }>("cron.list", {}, { env, timeoutMs: 3000 });
      const problems = res.problems ?? [];
      const errors = problems.filter((p) => p.level === "error");
      const say = (p: (typeof problems)[number]) => `line ${p.line}${p.job ? ` (job ${p.job})` : ""}: ${p.message}`;
      if (errors.length)
        add({
          check: "cron_file",
          ok: false,
          level: "error",
          detail: `cron.toml has ${errors.length} error(s), so no cron job runs; ${say(errors[0])}`,
          hint: "fix it, then 'ep agent cron reload' ('ep agent cron list' shows every problem)",
        });
      else if (problems.length)
        add({
          check: "cron_file",
          ok: false,
          level: "warn",
          detail: `cron.toml: ${problems.length} field(s) ignored; ${say(problems[0])}`,
          hint: "remove the fields that do not apply ('ep agent cron list' shows them)",
        });
      else add({ check: "cron_file", ok: true, level: "ok", detail: "cron.toml loaded (or none)" });
    } catch (err) {
      add({
        check: "cron_file",
        ok: false,
        level: "warn",
        detail: `could not ask the daemon: ${(err as Error).message}`,
      });
    }
  }
  return results;
}

/**
 * The runtimes: the commands epd would run, as the running daemon sees them (its PATH, --version), else as this shell
 * sees them.
 */
async function runtimeResults(env: NodeJS.ProcessEnv): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  const add = (r: CheckResult) => results.push(r);
  const local = runtimeChecks(env);
  let fromDaemon: CheckResult[] | undefined;
  if ((await probeSocket(daemonSockets(env).mgmt)) === "live") {
    try {
      const res = await mgmtCall<{
        runtimes?: {
          kind: string;
          command: string;
          path?: string;
          version?: string;
          usable?: boolean;
          detail?: string;
        }[];
      }>("daemon.runtimes", {}, { env, timeoutMs: 15_000 });
      if (res.runtimes?.length) {
        const byCommand = new Map<string, { kinds: string[]; r: NonNullable<typeof res.runtimes>[number] }>();
        for (const r of res.runtimes) {
          const key = basename(r.command);
          const seen = byCommand.get(key);
          if (seen) seen.kinds.push(r.kind);
          else byCommand.set(key, { kinds: [r.kind], r });
        }
        fromDaemon = [...byCommand].map(([name, { kinds, r }]) => {
          if (kinds.includes("confinement"))
            return confinementCheck(r.usable ? r.path : undefined, `${r.detail ?? "bwrap"}, as epd sees it`);
          const level: "error" | "warn" = kinds.includes("shell") ? "error" : "warn";
          const uses = `${kinds.join(" / ")} runtime${kinds.length > 1 ? "s" : ""}`;
          return r.usable
            ? {
                check: `runtime_${name}`,
                ok: true,
                level,
                detail: `${r.path}${r.version ? ` — ${r.version}` : ""} (${uses}, as epd sees it)`,
              }
            : {
                check: `runtime_${name}`,
                ok: false,
                level,
                detail: `${r.detail ?? `${r.command} not found`} (${uses} unavailable to epd)`,
                hint: `install ${name} where epd's PATH finds it, or set [${kinds[0]}] command in runtimes.toml`,
              };
        });
      }
    } catch {
      // an older daemon without DaemonService.Runtimes: this shell's view below
    }
  }
  if (fromDaemon) {
    const names = new Set(fromDaemon.map((c) => c.check));
    // epd's view of a binary (its PATH) replaces this shell's
    for (const r of [...local.filter((c) => !names.has(c.check)), ...fromDaemon]) add(r);
  } else for (const r of local) add(r);
  return results;
}

/** What the fan-out's GET /stats answers (daemon/fanout/fanout.ts FanoutStats), as far as doctor reads it. */
interface FanoutStatsView {
  upstream?: string;
  lastEventId?: number;
  throttledSince?: string | null;
  throttledUntil?: string | null;
  throttleEpisodes?: number;
  downSince?: string | null;
  clients?: number;
}

/**
 * Asks the daemon's local fan-out (EP_FANOUT_LISTEN) for its /stats: a rate-limit pause (the tower
 * said rate_limit.remaining 0) or an upstream outage is reported. Reading /events would not do:
 * while throttled the fan-out holds retransmission, the chunk that says so included.
 */
async function fanoutCheck(listen: string): Promise<CheckResult> {
  const check = "fanout_rate_limit";
  const base = `http://${listen.replace(/^https?:\/\//, "").replace(/\/+$/, "")}`;
  let stats: FanoutStatsView;
  try {
    const res = await timedFetch(`${base}/stats`, { timeoutMs: 2000 });
    if (!res.ok) {
      return {
        check,
        ok: false,
        level: "error",
        detail: `${base}/stats → ${res.status}`,
        hint:
          res.status === 404
            ? "this epd's fan-out does not serve /stats; upgrade epd"
            : "is epd running with the local fan-out (EP_FANOUT_LISTEN)?",
      };
    }
    stats = (await res.json()) as FanoutStatsView;
  } catch (err) {
    return {
      check,
      ok: false,
      level: "error",
      detail: `cannot reach the local fan-out at ${base}: ${(err as Error).message}`,
      hint: "start epd with EP_FANOUT_LISTEN set to this address, or unset EP_FANOUT_LISTEN here",
    };
  }
  if (stats.throttledUntil) {
    return {
      check,
      ok: false,
      level: "warn",
      detail:
        `the tower is throttling the daemon's event stream (rate_limit.remaining 0 ` +
        `since ${stats.throttledSince ?? "?"}); the fan-out holds retransmission ` +
        `until ${stats.throttledUntil} (${stats.throttleEpisodes ?? 1} pause(s) so far)`,
      hint:
        "nothing is lost: events go out when the pause ends. The tower allows " +
        "EP_STREAM_RATE_LIMIT new stream connections per minute per token: raise " +
        "it on the tower, or find what reconnects so often ('ep daemon logs')",
    };
  }
  if (stats.upstream === "down") {
    return {
      check,
      ok: false,
      level: "error",
      detail: `the fan-out cannot follow the tower's event stream (matrix-down since ${stats.downSince ?? "?"})`,
      hint: "check that the tower is up and accepts epd's node token ('ep daemon logs' shows the answer)",
    };
  }
  const earlier = stats.throttleEpisodes ? `; ${stats.throttleEpisodes} earlier rate-limit pause(s)` : "";
  return {
    check,
    ok: true,
    level: "warn",
    detail:
      `${base}/events: upstream ${stats.upstream ?? "?"}, last event ${stats.lastEventId ?? 0}, ` +
      `${stats.clients ?? 0} local client(s), not throttled${earlier}`,
  };
}

/**
 * Each executable that is missing names the PATH searched; said once per binary, a long PATH
 * buried the report (four times over, issue 38). When several details name the same PATH, they
 * say "PATH" and one `path` entry after them holds it.
 */
export function pathOnce(checks: CheckResult[]): CheckResult[] {
  const named = (c: CheckResult) => /PATH \(([^()]*)\)/.exec(c.detail)?.[1];
  const paths = checks.map(named).filter((p): p is string => p !== undefined);
  const counts = new Map<string, number>();
  for (const p of paths) counts.set(p, (counts.get(p) ?? 0) + 1);
  const repeated = [...counts].filter(([, n]) => n > 1).map(([p]) => p);
  if (!repeated.length) return checks;
  const out = checks.map((c) => {
    const p = named(c);
    return p !== undefined && repeated.includes(p) ? { ...c, detail: c.detail.replace(`PATH (${p})`, "PATH") } : c;
  });
  for (const p of repeated) out.push({ check: "path", ok: true, level: "ok", detail: `the PATH searched above: ${p}` });
  return out;
}

export async function run(ctx: Context): Promise<number> {
  const fixed = ctx.opts.fix ? fix(ctx.env) : [];
  const results = pathOnce(await runChecks(ctx));
  const failed = results.filter((r) => !r.ok && r.level === "error");
  if (ctx.json) ctx.out(json({ ok: failed.length === 0, fixed, checks: results }));
  else {
    for (const f of fixed) ctx.out(`fixed: ${f}`);
    for (const r of results) {
      const mark = r.ok ? "ok  " : r.level === "warn" ? "warn" : "FAIL";
      ctx.out(`${mark}  ${r.check.padEnd(18)} ${r.detail}`);
      if (!r.ok && r.hint) ctx.out(`      ${"".padEnd(18)} hint: ${r.hint}`);
    }
    ctx.out(failed.length ? `\n${failed.length} check(s) failed` : "\nall checks passed");
  }
  return failed.length ? 1 : 0;
}
