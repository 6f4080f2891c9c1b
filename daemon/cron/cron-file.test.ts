import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { cronFileError, parseCronFile, readCronFile } from "./cron-file.js";
import { parseInterval } from "./cron-schedule.js";

describe("cron.toml parsing", () => {
  it("reads every seed field and applies the documented defaults", () => {
    const result = parseCronFile(`
[[job]]
name = "standup"
schedule = "0 9 * * 1-5"
session = "pm"
prompt = "/standup"

[[job]]
name = "disk"
schedule = "*/15 * * * *"
dispatch = "bash"
prompt = "df -h /"
missed = "run_once"

[[job]]
name = "pulse"
kind = "heartbeat"
interval = "2h30m"
session = "ops"
prompt = "check in"
`);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.jobs).toEqual([
      {
        name: "standup",
        kind: "cron",
        schedule: "0 9 * * 1-5",
        session: "pm",
        prompt: "/standup",
        dispatch: "signal",
        missed: "skip",
        line: 2,
      },
      {
        name: "disk",
        kind: "cron",
        schedule: "*/15 * * * *",
        prompt: "df -h /",
        dispatch: "bash",
        missed: "run_once",
        line: 8,
      },
      {
        name: "pulse",
        kind: "heartbeat",
        interval: "2h30m",
        intervalMs: 9_000_000,
        session: "ops",
        prompt: "check in",
        dispatch: "signal",
        missed: "skip",
        line: 15,
      },
    ]);
  });

  it("an empty or missing file is no jobs", () => {
    expect(parseCronFile("")).toEqual({ ok: true, jobs: [] });
    expect(readCronFile(join(tmpdir(), "no-such-dir-ep", "cron.toml"))).toEqual({ ok: true, jobs: [] });
  });

  it("a TOML syntax error gives its line", () => {
    const result = parseCronFile(`[[job]]\nname = "a"\nschedule = "* * * * *\nprompt = "x"\n`);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.errors).toHaveLength(1);
    expect(result.errors[0].line).toBe(3);
    expect(result.errors[0].message).toMatch(/TOML syntax error/);
  });

  it("reports every bad field with the job and the line it is on", () => {
    const text = [
      "[[job]]", // 1
      'name = "ok"', // 2
      'schedule = "* * * * *"', // 3
      'session = "s"', // 4
      'prompt = "p"', // 5
      "", // 6
      "[[job]]", // 7
      'name = "bad"', // 8
      'schedule = "61 * * * *"', // 9
      'dispatch = "telepathy"', // 10
      'prompt = "p"', // 11
      'schedual = "typo"', // 12
      "", // 13
      "[[job]]", // 14
      'name = "ok"', // 15
      'kind = "heartbeat"', // 16
      'interval = "5x"', // 17
      'session = "s"', // 18
      'prompt = "p"', // 19
      "[[job]]", // 20
      'schedule = "* * *"', // 21
      'dispatch = "bash"', // 22
      'prompt = "true"', // 23
      'session = "s"', // 24
    ].join("\n");
    const result = parseCronFile(text);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    const brief = result.errors.map((e) => `${e.line} ${e.job} ${e.field}`);
    expect(brief).toEqual([
      "9 bad schedule",
      "10 bad dispatch",
      "12 bad schedual",
      "15 ok name",
      "17 ok interval",
      "20 #4 name",
      "21 #4 schedule",
    ]);
    expect(result.errors.find((e) => e.line === 15)!.message).toMatch(
      /duplicate job name "ok" \(first defined on line 1\)/,
    );
    // does not apply to bash: a warning
    expect(result.warnings?.map((e) => `${e.line} ${e.field}`)).toEqual(["24 session"]);
    expect(result.errors.find((e) => e.line === 10)!.message).toMatch(/"signal", "bash"/);
    const err = cronFileError("/x/cron.toml", result.errors);
    expect(err.code).toBe("invalid_argument");
    expect(err.message).toContain('line 9, job "bad", field schedule');
    expect(err.details?.errors).toHaveLength(7);
  });

  it("required fields depend on kind and dispatch", () => {
    const result = parseCronFile(`
[[job]]
name = "a"
kind = "heartbeat"
schedule = "* * * * *"
prompt = "x"
session = "s"

[[job]]
name = "b"
prompt = "x"
interval = "1m"

[[job]]
name = "c"
schedule = "* * * * *"
prompt = ""
session = "s"
kind = 3
`);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    const msgs = result.errors.map((e) => `${e.job}.${e.field}: ${e.message}`);
    expect(msgs).toEqual([
      expect.stringMatching(/^a\.interval: interval is required for kind = "heartbeat"/),
      expect.stringMatching(/^b\.schedule: schedule is required/),
      expect.stringMatching(/^b\.session: session is required for dispatch = "signal"/),
      expect.stringMatching(/^c\.prompt: prompt must not be empty/),
      expect.stringMatching(/^c\.kind: kind must be a string/),
    ]);
    // fields that do not apply are warnings (ignored), not errors
    expect((result.warnings ?? []).map((e) => `${e.job}.${e.field}: ${e.message}`)).toEqual([
      expect.stringMatching(/^a\.schedule: schedule is not used by kind = "heartbeat"; it is ignored/),
      expect.stringMatching(/^b\.interval: interval is only used by kind = "heartbeat"; it is ignored/),
    ]);
  });

  it("a bash job written with a session (as in the seed's table) loads, with a warning", () => {
    const result = parseCronFile(
      [
        "[[job]]",
        'name = "backup"',
        'schedule = "0 3 * * *"',
        'dispatch = "bash"',
        'session = "ops"',
        'prompt = "tar czf /tmp/b.tgz /srv"',
      ].join("\n"),
    );
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.jobs.map((j) => j.name)).toEqual(["backup"]);
    expect(result.warnings).toEqual([
      {
        line: 5,
        field: "session",
        job: "backup",
        message: 'session is not used by dispatch = "bash" (bash jobs run with no session); it is ignored',
      },
    ]);
  });

  it("keys outside [[job]] and a non-table job are errors", () => {
    const r1 = parseCronFile(`tick = 30\n[[job]]\nname = "a"\nschedule = "@daily"\nsession = "s"\nprompt = "p"\n`);
    expect(r1.ok ? [] : r1.errors.map((e) => [e.line, e.field])).toEqual([[1, "tick"]]);
    const r2 = parseCronFile(`\njob = "nope"\n`);
    expect(r2.ok ? [] : r2.errors.map((e) => [e.line, e.field])).toEqual([[2, "job"]]);
  });

  it("a multi-line prompt containing a [[job]] line does not shift line numbers", () => {
    const result = parseCronFile(
      [
        "[[job]]",
        'name = "a"',
        'dispatch = "bash"',
        'schedule = "* * * * *"',
        'prompt = """',
        "[[job]]",
        'echo hi"""',
        "",
        "[[job]]",
        'name = "b"',
        'schedule = "bad"',
        'dispatch = "bash"',
        'prompt = "x"',
      ].join("\n"),
    );
    expect(result.ok ? [] : result.errors.map((e) => [e.line, e.job, e.field])).toEqual([[11, "b", "schedule"]]);
  });

  it("readCronFile reads from disk", () => {
    const dir = mkdtempSync(join(tmpdir(), "ep-cronfile-"));
    writeFileSync(
      join(dir, "cron.toml"),
      `[[job]]\nname = "x"\nschedule = "@hourly"\ndispatch = "bash"\nprompt = "true"\n`,
    );
    const result = readCronFile(join(dir, "cron.toml"));
    expect(result.ok && result.jobs.map((j) => j.name)).toEqual(["x"]);
  });
});

describe("heartbeat intervals", () => {
  it("accepts single and compound units", () => {
    expect(parseInterval("45s")).toBe(45_000);
    expect(parseInterval("15m")).toBe(900_000);
    expect(parseInterval("2h")).toBe(7_200_000);
    expect(parseInterval("1d")).toBe(86_400_000);
    expect(parseInterval("2h30m")).toBe(9_000_000);
    expect(parseInterval("1d12h5m3s")).toBe(86_400_000 + 43_200_000 + 300_000 + 3_000);
  });
  it("rejects zero, unknown units, wrong order and empty", () => {
    for (const bad of ["", "0s", "0h0m", "5x", "30m2h", "1.5h", "h", "-1m", "400d", "10"]) {
      expect(() => parseInterval(bad), bad).toThrow(/interval/);
    }
  });
});
