// cron.toml: `[[job]]` tables parsed and validated into CronJob values, or every error
// found, each with the line it sits on, so `ep agent cron reload` can show them all at once.
import { readFileSync } from "node:fs";
import { parse, TomlError } from "smol-toml";
import { EpError } from "../../common/errors.js";
import { keyLine, scanTableArray } from "../../common/toml-lines.js";
import { parseInterval, validateSchedule } from "./cron-schedule.js";
import type { CronDispatchMode, CronJob, CronKind, MissedPolicy } from "./cron-types.js";

// the job's shape lives in cron-types.ts (cron-schedule.ts reads it too); callers import it from here
export type { CronDispatchMode, CronJob, CronKind, MissedPolicy } from "./cron-types.js";

export interface CronFileError {
  line: number;
  /** The field at fault (absent for TOML syntax errors). */
  field?: string;
  /** The job's name when it has one. */
  job?: string;
  message: string;
}

/** ok: the jobs, and warnings for fields that do not apply (the job still loads). */
export type CronFileResult =
  | { ok: true; jobs: CronJob[]; warnings?: CronFileError[] }
  | { ok: false; errors: CronFileError[]; warnings?: CronFileError[] };

export const CRON_JOB_FIELDS = [
  "name",
  "schedule",
  "session",
  "prompt",
  "dispatch",
  "kind",
  "interval",
  "missed",
] as const;
const JOB_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Parses and validates cron.toml text. Never throws: a bad file gives every error found. */
export function parseCronFile(text: string): CronFileResult {
  let doc: Record<string, unknown>;
  try {
    doc = parse(text) as Record<string, unknown>;
  } catch (err) {
    if (err instanceof TomlError) {
      const message = err.message.split("\n")[0].replace(/^Invalid TOML document:\s*/i, "");
      return { ok: false, errors: [{ line: err.line, message: `TOML syntax error: ${message}` }] };
    }
    return { ok: false, errors: [{ line: 1, message: `cannot parse: ${String(err)}` }] };
  }

  const lines = text.split(/\r?\n/);
  const errors: CronFileError[] = [];
  const warnings: CronFileError[] = [];
  for (const key of Object.keys(doc)) {
    if (key !== "job") {
      errors.push({
        line: keyLine(lines, key, 1, lines.length) ?? 1,
        field: key,
        message: `unknown top-level key "${key}"; cron.toml holds only [[job]] tables`,
      });
    }
  }
  const rawJobs = doc.job;
  if (rawJobs === undefined) return errors.length ? { ok: false, errors } : { ok: true, jobs: [] };
  if (!Array.isArray(rawJobs) || rawJobs.some((j) => typeof j !== "object" || j === null || Array.isArray(j))) {
    errors.push({
      line: keyLine(lines, "job", 1, lines.length) ?? 1,
      field: "job",
      message: "job must be an array of tables written as [[job]]",
    });
    return { ok: false, errors };
  }

  const blocks = scanTableArray(lines, "job");
  const aligned = blocks.length === rawJobs.length;
  const jobs: CronJob[] = [];
  const seen = new Map<string, number>();
  rawJobs.forEach((raw, index) => {
    const job = parseJob(raw as Record<string, unknown>, index, {
      lines,
      block: aligned ? blocks[index] : undefined,
      seen,
      errors,
      warnings,
    });
    if (job) jobs.push(job);
  });
  const byLine = (a: CronFileError, b: CronFileError) =>
    a.line - b.line || (a.field ?? "").localeCompare(b.field ?? "");
  errors.sort(byLine);
  warnings.sort(byLine);
  return errors.length ? { ok: false, errors, warnings } : { ok: true, jobs, warnings };
}

/** Reads and parses cron.toml; a missing file is an empty job list (cron is optional). */
export function readCronFile(path: string): CronFileResult {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { ok: true, jobs: [] };
    return { ok: false, errors: [{ line: 0, message: `cannot read ${path}: ${(err as Error).message}` }] };
  }
  return parseCronFile(text);
}

export function formatCronFileError(e: CronFileError): string {
  const where = [`line ${e.line}`, e.job && `job "${e.job}"`, e.field && `field ${e.field}`].filter(Boolean).join(", ");
  return `${where}: ${e.message}`;
}

/** The EpError reload/start report for an invalid file: every error, each with its line. */
export function cronFileError(path: string, errors: CronFileError[]): EpError {
  const n = errors.length;
  const message = `${path} has ${n} error${n === 1 ? "" : "s"}; the running jobs were kept:\n${errors
    .map((e) => "  " + formatCronFileError(e))
    .join("\n")}`;
  return new EpError("invalid_argument", message, { file: path, errors });
}

interface JobContext {
  lines: string[];
  /** the job's [[job]] block in the text, when the blocks line up with the parsed tables */
  block: { header: number; start: number; end: number } | undefined;
  /** job names so far → their header line */
  seen: Map<string, number>;
  errors: CronFileError[];
  warnings: CronFileError[];
}

/** Checks one [[job]] table, adding its errors and warnings (with lines); the job when it has no errors. */
function parseJob(
  table: Record<string, unknown>,
  index: number,
  { lines, block, seen, errors, warnings }: JobContext,
): CronJob | undefined {
  const header = block?.header ?? keyLine(lines, "job", 1, lines.length) ?? 1;
  const lineOf = (field: string) => (block && keyLine(lines, field, block.start, block.end)) || header;
  const name = typeof table.name === "string" && table.name ? table.name : undefined;
  const fail = (field: string, message: string) =>
    errors.push({ line: lineOf(field), field, job: name ?? `#${index + 1}`, message });
  // a field that does not apply to this kind of job is ignored with a warning, never fatal
  const warn = (field: string, message: string) =>
    warnings.push({ line: lineOf(field), field, job: name ?? `#${index + 1}`, message });
  const before = errors.length;

  for (const key of Object.keys(table)) {
    if (!(CRON_JOB_FIELDS as readonly string[]).includes(key)) {
      fail(key, `unknown field "${key}"; known fields: ${CRON_JOB_FIELDS.join(", ")}`);
    }
  }
  const str = (field: string): string | undefined => {
    const v = table[field];
    if (v === undefined) return undefined;
    if (typeof v !== "string") {
      fail(field, `${field} must be a string`);
      return undefined;
    }
    return v;
  };
  // undefined when the value is invalid, so checks that depend on it are not piled on
  const oneOf = <T extends string>(field: string, allowed: readonly T[], fallback: T): T | undefined => {
    if (table[field] === undefined) return fallback;
    const v = str(field);
    if (v === undefined) return undefined;
    if (!(allowed as readonly string[]).includes(v)) {
      fail(field, `${field} must be one of ${allowed.map((a) => `"${a}"`).join(", ")}, not "${v}"`);
      return undefined;
    }
    return v as T;
  };

  if (table.name === undefined) fail("name", "name is required");
  else if (typeof table.name !== "string" || !JOB_NAME.test(table.name)) {
    fail("name", "name must be 1-64 characters of letters, digits, '.', '_' or '-', starting with a letter or digit");
  } else if (seen.has(table.name)) {
    fail("name", `duplicate job name "${table.name}" (first defined on line ${seen.get(table.name)})`);
  } else seen.set(table.name, header);

  const kind = oneOf<CronKind>("kind", ["cron", "heartbeat"], "cron");
  const dispatch = oneOf<CronDispatchMode>("dispatch", ["signal", "bash"], "signal");
  const missed = oneOf<MissedPolicy>("missed", ["skip", "run_once"], "skip") ?? "skip";

  const prompt = str("prompt");
  if (table.prompt === undefined) fail("prompt", "prompt is required (the prompt to signal, or the bash command)");
  else if (prompt !== undefined && !prompt.trim()) fail("prompt", "prompt must not be empty");

  const session = str("session");
  if (dispatch === "signal" && table.session === undefined) {
    fail("session", 'session is required for dispatch = "signal" (the profile or session to signal)');
  } else if (session !== undefined && !session.trim()) {
    fail("session", "session must not be empty");
  } else if (dispatch === "bash" && table.session !== undefined) {
    warn("session", 'session is not used by dispatch = "bash" (bash jobs run with no session); it is ignored');
  }

  const schedule = str("schedule");
  const interval = str("interval");
  let intervalMs: number | undefined;
  if (kind === undefined) {
    // kind is wrong; which of schedule/interval applies is unknown
  } else if (kind === "cron") {
    if (table.schedule === undefined) fail("schedule", 'schedule is required for kind = "cron" (e.g. "*/15 * * * *")');
    else if (schedule !== undefined) {
      const problem = validateSchedule(schedule);
      if (problem) fail("schedule", problem);
    }
    if (table.interval !== undefined)
      warn("interval", 'interval is only used by kind = "heartbeat"; it is ignored (schedule applies)');
  } else {
    if (table.interval === undefined)
      fail("interval", 'interval is required for kind = "heartbeat" (e.g. "30m", "2h30m")');
    else if (interval !== undefined) {
      try {
        intervalMs = parseInterval(interval);
      } catch (err) {
        fail("interval", (err as Error).message);
      }
    }
    if (table.schedule !== undefined)
      warn("schedule", 'schedule is not used by kind = "heartbeat"; it is ignored (interval applies)');
  }

  if (errors.length > before || !name || prompt === undefined || !kind || !dispatch) return undefined;
  return {
    name,
    kind,
    ...(kind === "cron" ? { schedule } : { interval, intervalMs }),
    ...(dispatch === "signal" ? { session } : {}),
    prompt,
    dispatch,
    missed,
    line: header,
  };
}
