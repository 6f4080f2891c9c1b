// The run's record: the wrapper writes the command's exit status and exits the same way; epd's
// next start reads it with the spool's tail.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { clearRunRecord, finishedRun, openSpool, runRecordOf, wrapCommand } from "./run-record.js";

function run(
  command: string[],
  onStart?: (pid: number) => void,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn(command[0]!, command.slice(1), { detached: true, stdio: ["ignore", "pipe", "inherit"] });
    let stdout = "";
    let started = false;
    child.stdout!.on("data", (d: Buffer) => {
      stdout += d.toString();
      // Once: a second SIGTERM could land while the trap runs and run it again.
      if (!started && stdout.includes("ready")) {
        started = true;
        onStart?.(child.pid!);
      }
    });
    child.on("close", (code, signal) => resolve({ code, signal, stdout }));
  });
}

describe("run record", () => {
  let home: string;
  beforeEach(() => void (home = mkdtempSync(join(tmpdir(), "ep-record-"))));
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  it(
    "the wrapper passes output and exit code through and " + "writes the status; a read gives it with the spool's tail",
    async () => {
      const rec = runRecordOf(home, "tsk_1");
      clearRunRecord(rec);
      expect(finishedRun(rec, 10)).toBeUndefined();
      const r = await run(wrapCommand(rec.exit, ["sh", "-c", 'echo "$0 $1"; exit 3', "a b", "c"]));
      expect(r).toEqual({ code: 3, signal: null, stdout: "a b c\n" });
      const spool = openSpool(rec.output, (err) => {
        throw err;
      });
      spool.write("0123456789");
      spool.write("abcdef\n");
      spool.close();
      expect(finishedRun(rec, 10)).toEqual({ exitCode: 3, outputTail: "789abcdef\n" });
    },
  );

  it(
    "a command killed by a signal is reported as killed by it, its status " +
      "written; SIGTERM to the group reaches the command, not the wrapper",
    async () => {
      const rec = runRecordOf(home, "tsk_2");
      clearRunRecord(rec);
      const killed = await run(wrapCommand(rec.exit, ["sh", "-c", "kill -KILL $$"]));
      expect(killed.signal).toBe("SIGKILL");
      expect(readFileSync(rec.exit, "utf8")).toBe("137\n");
      const term = await run(
        wrapCommand(rec.exit, ["sh", "-c", "trap 'echo bye; exit 7' TERM; echo ready; while :; do sleep 0.05; done"]),
        (pid) => process.kill(-pid, "SIGTERM"),
      );
      expect(term).toMatchObject({ code: 7, stdout: "ready\nbye\n" });
      expect(finishedRun(rec, 100)).toEqual({ exitCode: 7, outputTail: "" });
    },
  );

  it("a new run of the task clears the old record; an empty or torn status is not an end", () => {
    const rec = runRecordOf(home, "tsk_3");
    clearRunRecord(rec);
    writeFileSync(rec.exit, "0\n");
    writeFileSync(rec.output, "old");
    clearRunRecord(rec);
    expect(existsSync(rec.exit) || existsSync(rec.output)).toBe(false);
    writeFileSync(rec.exit, "");
    expect(finishedRun(rec, 10)).toBeUndefined();
    writeFileSync(rec.exit, "1");
    expect(finishedRun(rec, 10)).toBeUndefined();
  });
});
