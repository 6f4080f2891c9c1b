// Fleet settings from the daemon's environment, each checked and named in its error.
import { EpError } from "../../common/errors.js";

export interface FleetSettings {
  /** tmux `-L` socket of profile panes (EP_TMUX_SOCKET, default `ep`). */
  tmuxSocket: string;
  /** Cron tick (EP_CRON_TICK_MS, default 60000). */
  cronTickMs: number;
  /**
   * Watchdog poll / grace / throttle (EP_WATCHDOG_POLL_MS 60000, EP_WATCHDOG_GRACE_MS 90000, EP_WATCHDOG_THROTTLE_MS
   * 1800000).
   */
  pollMs: number;
  graceMs: number;
  throttleMs: number;
  /** Nightly restart, local "HH:MM" (EP_NIGHTLY_RESTART; off when unset). */
  nightly: string | undefined;
  /** Service manager for supervised service agents (EP_SUPERVISE_BACKEND: auto | systemd | process; default auto). */
  backend: "auto" | "systemd" | "process";
  /**
   * How often the node's cron and supervision state is pushed to the tower besides on change (EP_NODE_STATE_MS, default
   * 60000).
   */
  stateReportMs: number;
}

function positive(env: NodeJS.ProcessEnv, name: string, fallback: number, allowZero = false): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || (!allowZero && n === 0)) {
    throw new EpError(
      "config_invalid",
      `${name} must be a ${allowZero ? "non-negative" : "positive"} ` +
        `integer of milliseconds (got ${JSON.stringify(raw)})`,
      { field: name },
    );
  }
  return n;
}

export function fleetSettings(env: NodeJS.ProcessEnv, fallbackSocket?: string): FleetSettings {
  const tmuxSocket = env.EP_TMUX_SOCKET || fallbackSocket || "ep";
  if (!/^[A-Za-z0-9_.-]{1,100}$/.test(tmuxSocket)) {
    throw new EpError(
      "config_invalid",
      `EP_TMUX_SOCKET must be a tmux socket name (letters, digits, '_', '.', '-'), got ${JSON.stringify(tmuxSocket)}`,
      { field: "EP_TMUX_SOCKET" },
    );
  }
  const nightly = env.EP_NIGHTLY_RESTART || undefined;
  if (nightly !== undefined && !/^([01]\d|2[0-3]):[0-5]\d$/.test(nightly)) {
    throw new EpError(
      "config_invalid",
      `EP_NIGHTLY_RESTART must be a local time HH:MM (got ${JSON.stringify(nightly)})`,
      { field: "EP_NIGHTLY_RESTART" },
    );
  }
  const backend = (env.EP_SUPERVISE_BACKEND || "auto") as FleetSettings["backend"];
  if (!["auto", "systemd", "process"].includes(backend)) {
    throw new EpError(
      "config_invalid",
      `EP_SUPERVISE_BACKEND must be auto, systemd or process (got ${JSON.stringify(backend)})`,
      { field: "EP_SUPERVISE_BACKEND" },
    );
  }
  return {
    tmuxSocket,
    cronTickMs: positive(env, "EP_CRON_TICK_MS", 60_000),
    pollMs: positive(env, "EP_WATCHDOG_POLL_MS", 60_000),
    graceMs: positive(env, "EP_WATCHDOG_GRACE_MS", 90_000, true),
    throttleMs: positive(env, "EP_WATCHDOG_THROTTLE_MS", 30 * 60_000, true),
    nightly,
    backend,
    stateReportMs: positive(env, "EP_NODE_STATE_MS", 60_000),
  };
}
