// What an agent run may touch, and the bubblewrap command line that holds it there
// (docs/runtimes.md "Permissions"). Two layers keep an agent in its workspace: each CLI's own
// permission settings (the vendor files) and this one, which holds whatever a CLI's own sandbox
// does: the whole filesystem read-only, the run's places writable, EP's own files not there at all.
import { existsSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { EpError } from "../../common/errors.js";
import { resolveExecutable } from "./process-group.js";

/** The permission policies of the agent runtimes (runtimes.toml and agents.toml `permission`). */
export const PERMISSIONS = ["workspace", "ask", "read-only", "unconfined"] as const;
export type Permission = (typeof PERMISSIONS)[number];

/** The policy names before 2026-11-27 and what replaced them (a file using one is refused, naming the new word). */
export const RENAMED_PERMISSIONS: Record<string, Permission> = {
  allow_once_in_cwd: "workspace",
  allow_once: "workspace",
  allow_always: "unconfined",
  reject: "read-only",
  claude: "workspace",
};

export const isPermission = (value: unknown): value is Permission =>
  typeof value === "string" && (PERMISSIONS as readonly string[]).includes(value);

/** Why a permission value is not one: the renamed ones say their new name. */
export function permissionProblem(value: unknown): string {
  const renamed = typeof value === "string" ? RENAMED_PERMISSIONS[value] : undefined;
  const allowed = `must be one of ${PERMISSIONS.join(", ")}`;
  return renamed ? `'${String(value)}' was renamed: use "${renamed}" (${allowed})` : allowed;
}

/** The places of one run, as the worker knows them. */
export interface RunPlaces {
  /** the run's own directory (work/<task_id>): its MCP config, scratch files */
  runDir: string;
  /** extra writable paths: a worktree's repository metadata (git's common dir) */
  writable: string[];
  /** paths that must not be seen at all: EP_HOME, the node identity file, the tower's files */
  hidden: string[];
  /** what under a hidden path the run still needs: the secrets socket (writable), epd's bin/ (read-only) */
  sockets: string[];
  readable: string[];
  /** the user's home as the run sees it (HOME) */
  home: string;
}

/** The per-user state directories each CLI writes (its sessions, caches, settings backups). */
const CLI_STATE = [".claude", ".codex", ".gemini", ".cache"];
/** State files a CLI rewrites in place. */
const CLI_STATE_FILES = [".claude.json"];

export const BWRAP_MISSING =
  "bubblewrap is not installed on this node: a confined agent run needs `bwrap` " +
  "(Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap). " +
  'To run this agent without confinement, set permission = "unconfined" for its runtime or profile (docs/runtimes.md)';

/** The bwrap executable on the run's PATH, or an EpError naming the package. */
export function findBwrap(env: Record<string, string | undefined>): string | EpError {
  return (
    resolveExecutable("bwrap", { PATH: env.PATH ?? "/usr/bin:/bin" }) ??
    new EpError("runtime_missing", BWRAP_MISSING, { field: "permission" })
  );
}

/**
 * bwrap's arguments (before `--` and the command) for a run in `cwd` under `permission`:
 * `/` read-only; /dev, /proc (its own PID namespace: no other process's environment or files);
 * /tmp writable (scratch space, as codex's own workspace-write sandbox leaves it); the hidden
 * paths covered by empty directories, with the run's own doors bound back; then, writable unless the
 * policy is read-only, the workspace (cwd), the run directory and the extra places; the CLIs'
 * state in the user's home writable always (a CLI that cannot write its session files does not
 * start); the secrets socket bound back in. No capabilities, even for root.
 */
export function bwrapArgs(cwd: string, permission: Permission, places: RunPlaces): string[] {
  // a user namespace of its own with the same ids inside: the mounts made here are locked for
  // whatever runs inside (no capability there either; a CLI's own bwrap cannot nest: vendor-b.ts)
  const ids = ["--unshare-user", "--uid", String(process.getuid?.() ?? 0), "--gid", String(process.getgid?.() ?? 0)];
  const args = [
    "--die-with-parent",
    ...ids,
    "--unshare-pid",
    "--unshare-ipc",
    "--cap-drop",
    "ALL",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--bind",
    "/tmp",
    "/tmp",
  ];
  for (const path of places.hidden) {
    if (!existsSync(path)) continue;
    if (statSync(path).isDirectory()) args.push("--tmpfs", path);
    else args.push("--ro-bind", "/dev/null", path);
  }
  const rw = permission === "read-only" ? "--ro-bind" : "--bind";
  for (const path of unique([places.runDir, cwd, ...places.writable])) if (existsSync(path)) args.push(rw, path, path);
  for (const path of stateDirs(places.home)) args.push("--bind", path, path);
  for (const socket of places.sockets) if (existsSync(socket)) args.push("--bind", socket, socket);
  for (const path of places.readable) if (existsSync(path)) args.push("--ro-bind", path, path);
  args.push("--chdir", cwd);
  return args;
}

/** The CLIs' state paths in `home`, made when missing so they can be bound (a bind needs its source). */
function stateDirs(home: string): string[] {
  const out: string[] = [];
  for (const rel of CLI_STATE) {
    const path = join(home, rel);
    try {
      mkdirSync(path, { recursive: true, mode: 0o700 });
      out.push(path);
    } catch {
      // a home we cannot write to: the CLI could not have written there either
    }
  }
  for (const rel of CLI_STATE_FILES) {
    const path = join(home, rel);
    try {
      if (!existsSync(path)) {
        mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
        writeFileSync(path, "{}\n", { mode: 0o600, flag: "wx" });
      }
      out.push(path);
    } catch {
      // as above
    }
  }
  return out;
}

const unique = (paths: string[]) => [...new Set(paths.filter(Boolean))];

/**
 * The command line that runs `command` under `permission`: as it is when unconfined (or when no
 * policy applies, the shell runtime's default), else inside bwrap. bwrap missing is an error
 * naming the package: a confined run never starts unconfined.
 */
export function confineCommand(o: {
  permission: Permission | undefined;
  cwd: string;
  places?: RunPlaces;
  env: Record<string, string | undefined>;
  command: string[];
}): string[] | EpError {
  if (o.permission === undefined || o.permission === "unconfined") return o.command;
  const bwrap = findBwrap(o.env);
  if (bwrap instanceof EpError) return bwrap;
  const places = o.places ?? {
    runDir: o.cwd,
    writable: [],
    hidden: [],
    sockets: [],
    readable: [],
    home: o.env.HOME ?? "/nonexistent",
  };
  return [bwrap, ...bwrapArgs(o.cwd, o.permission, places), "--", ...o.command];
}
