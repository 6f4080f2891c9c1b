// The journal: what one daemon wrote, the next one loads (snapshot + log), whatever point the
// first one stopped at — after a torn last line, between a snapshot and the log's truncation, or
// from an inflight.json written before the log existed.
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
  appendFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createJournal, readJournal, type InflightEntry } from "./journal.js";

const entry = (taskId: string, state: InflightEntry["state"] = "running"): InflightEntry => ({
  taskId,
  agentId: "a_1",
  state,
  startedAt: "2026-11-26T00:00:00.000Z",
});

describe("the journal", () => {
  let dir: string;
  beforeEach(() => void (dir = mkdtempSync(join(tmpdir(), "ep-journal-"))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("a change is an appended line, and the next daemon loads every change", async () => {
    const j = createJournal(dir);
    await j.load();
    await j.put(entry("t_1"));
    await j.put(entry("t_2"));
    await j.put({ ...entry("t_1", "reporting"), outcome: { ok: true, output: "hi", retryable: false } });
    await j.remove("t_2");
    expect(readFileSync(join(dir, "inflight.log"), "utf8").trim().split("\n")).toHaveLength(4);
    const next = createJournal(dir);
    const loaded = await next.load();
    expect(loaded).toEqual([{ ...entry("t_1", "reporting"), outcome: { ok: true, output: "hi", retryable: false } }]);
    expect(readJournal(dir)).toEqual(loaded);
    // loading folds the log into the snapshot
    expect(statSync(join(dir, "inflight.log")).size).toBe(0);
    expect(JSON.parse(readFileSync(join(dir, "inflight.json"), "utf8")).tasks).toEqual(loaded);
  });

  it("folds the log into inflight.json every 256 changes, and on compact()", async () => {
    const j = createJournal(dir);
    await j.load();
    for (let i = 0; i < 300; i++) await j.put(entry(`t_${i % 3}`));
    expect(readFileSync(join(dir, "inflight.log"), "utf8").trim().split("\n")).toHaveLength(300 - 256);
    expect(
      JSON.parse(readFileSync(join(dir, "inflight.json"), "utf8"))
        .tasks.map((e: InflightEntry) => e.taskId)
        .sort(),
    ).toEqual(["t_0", "t_1", "t_2"]);
    await j.remove("t_0");
    j.compact();
    expect(statSync(join(dir, "inflight.log")).size).toBe(0);
    expect(
      readJournal(dir)
        .map((e) => e.taskId)
        .sort(),
    ).toEqual(["t_1", "t_2"]);
  });

  it("skips a torn last line (epd killed mid-write)", async () => {
    const j = createJournal(dir);
    await j.load();
    await j.put(entry("t_1"));
    appendFileSync(join(dir, "inflight.log"), '{"put":{"taskId":"t_2","agentId":"a_1","sta');
    expect((await createJournal(dir).load()).map((e) => e.taskId)).toEqual(["t_1"]);
  });

  it("a snapshot written but the log not yet emptied (stopped between the two) loads the same state", async () => {
    const j = createJournal(dir);
    await j.load();
    await j.put(entry("t_1"));
    await j.put(entry("t_2"));
    await j.remove("t_1");
    const log = readFileSync(join(dir, "inflight.log"), "utf8");
    j.compact();
    writeFileSync(join(dir, "inflight.log"), log); // as if the truncation never happened
    expect((await createJournal(dir).load()).map((e) => e.taskId)).toEqual(["t_2"]);
  });

  it("loads an inflight.json from before the log existed", async () => {
    writeFileSync(join(dir, "inflight.json"), JSON.stringify({ version: 1, tasks: [entry("t_old", "reporting")] }));
    expect(existsSync(join(dir, "inflight.log"))).toBe(false);
    expect((await createJournal(dir).load()).map((e) => e.taskId)).toEqual(["t_old"]);
  });

  it("refuses a snapshot that is not JSON, naming it (nothing is overwritten)", async () => {
    writeFileSync(join(dir, "inflight.json"), "{ not json");
    await expect(createJournal(dir).load()).rejects.toThrow(/inflight\.json is not valid JSON .*fix or remove it/);
    expect(readFileSync(join(dir, "inflight.json"), "utf8")).toBe("{ not json");
  });

  it("refuses a log it cannot read, naming it, instead of loading the snapshot alone", async () => {
    writeFileSync(join(dir, "inflight.json"), JSON.stringify({ version: 1, tasks: [entry("t_1")] }));
    mkdirSync(join(dir, "inflight.log")); // EISDIR on read
    expect(() => readJournal(dir)).toThrow(/inflight\.log: cannot read the journal/);
    await expect(createJournal(dir).load()).rejects.toThrow(/inflight\.log/);
    expect(readFileSync(join(dir, "inflight.json"), "utf8")).toContain("t_1");
  });

  it("says which file it could not write", async () => {
    const j = createJournal(join(dir, "home"));
    await j.load();
    rmSync(join(dir, "home"), { recursive: true });
    writeFileSync(join(dir, "home"), "not a directory");
    const j2 = createJournal(join(dir, "home"));
    await expect(j2.put(entry("t_1"))).rejects.toThrow(/inflight\.log: cannot write the journal/);
  });
});
