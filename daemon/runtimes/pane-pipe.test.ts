import { spawnSync } from "node:child_process";
import { lstatSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { FakeClock } from "../../test-support/fake-clock.js";
import { waitFor } from "../../test-support/wait.js";
import { createLineWriter, openPanePipe, type PanePipe } from "./pane-pipe.js";

const dirs: string[] = [];
const pipes: PanePipe[] = [];
afterEach(() => {
  for (const p of pipes.splice(0)) p.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), "ep-pane-pipe-"));
  dirs.push(d);
  return d;
};
const until = (cond: () => boolean) => waitFor(cond, 2000, 10);

describe("openPanePipe", () => {
  it("reads what writers append to the FIFO, across writers that come and go, and keeps the FIFO (0600)", async () => {
    const path = join(tempDir(), "a.fifo");
    let got = "";
    const pipe = openPanePipe(path, (t) => (got += t));
    pipes.push(pipe);
    expect(lstatSync(path).isFIFO()).toBe(true);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    // like tmux's pipe-pane: `cat >> fifo`, one writer after another
    expect(spawnSync("sh", ["-c", `printf 'one\\n' >> '${path}'; printf 'två ✓\\n' >> '${path}'`]).status).toBe(0);
    await until(() => got === "one\ntvå ✓\n");
    expect(pipe.bytes).toBe(Buffer.byteLength("one\ntvå ✓\n"));
    pipe.close();
    expect(lstatSync(path).isFIFO()).toBe(true); // the next daemon's pane keeps writing into it
    // a new reader takes the same FIFO
    let again = "";
    pipes.push(openPanePipe(path, (t) => (again += t)));
    spawnSync("sh", ["-c", `echo three >> '${path}'`]);
    await until(() => again === "three\n");
  });

  it("replaces a regular file in the way, and removes the FIFO when asked", async () => {
    const path = join(tempDir(), "b.fifo");
    writeFileSync(path, "stale");
    const pipe = openPanePipe(path, () => {});
    expect(lstatSync(path).isFIFO()).toBe(true);
    pipe.close({ remove: true });
    expect(() => lstatSync(path)).toThrow();
  });

  it("says which FIFO it cannot create", () => {
    expect(() => openPanePipe(join(tempDir(), "missing", "c.fifo"), () => {})).toThrow(
      /cannot create the pane pipe .*c\.fifo/,
    );
  });
});

describe("createLineWriter", () => {
  const setup = () => {
    const clock = new FakeClock();
    const written: string[] = [];
    const w = createLineWriter({
      write: (t) => written.push(t),
      redact: (t) => t.replaceAll("s3cret-value", "[redacted:X]"),
      clock,
      idleMs: 500,
    });
    return { clock, written, w };
  };

  it("redacts whole lines, so a value split across output chunks is still caught", () => {
    const { written, w } = setup();
    w.push("token: s3cr");
    expect(written).toEqual([]);
    w.push("et-value ok\nnext");
    expect(written).toEqual(["token: [redacted:X] ok\n"]);
    w.push(" line\r\n");
    expect(written.join("")).toBe("token: [redacted:X] ok\nnext line\r\n");
    expect(written.join("")).not.toContain("s3cret");
  });

  it("writes a partial line after the pane has been quiet, and on close", () => {
    const { clock, written, w } = setup();
    w.push("Password: s3cret-value");
    clock.advance(499);
    expect(written).toEqual([]);
    clock.advance(1);
    expect(written).toEqual(["Password: [redacted:X]"]);
    w.push("tail");
    w.close();
    expect(written).toEqual(["Password: [redacted:X]", "tail"]);
  });

  it("does not hold more than 64 KiB of one line", () => {
    const { written, w } = setup();
    w.push("x".repeat(70 * 1024));
    expect(written.join("").length).toBe(70 * 1024);
  });
});
