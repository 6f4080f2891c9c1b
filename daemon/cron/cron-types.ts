// A cron job as cron.toml defines it: what the file parser (cron-file.ts) produces and the
// schedule (cron-schedule.ts) reads, in a module of its own so neither imports the other's types.

export type CronKind = "cron" | "heartbeat";
export type CronDispatchMode = "signal" | "bash";
export type MissedPolicy = "skip" | "run_once";

export interface CronJob {
  name: string;
  /** `cron` (default): fires on `schedule`; `heartbeat`: fires every `interval`. */
  kind: CronKind;
  /** 5-field cron expression in local time (6 fields = with seconds); set for kind=cron only. */
  schedule?: string;
  /** As written (`2h30m`); set for kind=heartbeat only. */
  interval?: string;
  intervalMs?: number;
  /** Target profile / multiplexer session; required for dispatch=signal, absent for bash. */
  session?: string;
  prompt: string;
  dispatch: CronDispatchMode;
  missed: MissedPolicy;
  /** Line of the job's `[[job]]` header in the file. */
  line: number;
}
