import { describe, expect, it } from "vitest";
import { createLogger } from "../../common/log.js";
import { createStreamRedactor, redactDeep, redactingLogger, redactText, snapshot } from "./redact.js";

describe("redaction", () => {
  const values = snapshot(() => [
    ["SHORT", "abc123"],
    ["LONG", "xx-abc123-yy"],
    ["EMPTY", ""],
  ]);

  it("replaces every occurrence, longest value first, and ignores empty values", () => {
    expect(values.map(([n]) => n)).toEqual(["LONG", "SHORT"]);
    expect(redactText("a xx-abc123-yy b abc123 c abc123", values)).toBe(
      "a [redacted:LONG] b [redacted:SHORT] c [redacted:SHORT]",
    );
    expect(redactText("nothing here", values)).toBe("nothing here");
    expect(redactText("anything", [])).toBe("anything");
  });

  it("walks plain objects and arrays (keys too) and leaves the input untouched", () => {
    const input = { text: "v=abc123", nested: [{ deep: "xx-abc123-yy" }, 7, null], abc123: true };
    const out = redactDeep(input, values);
    expect(out).toEqual({
      text: "v=[redacted:SHORT]",
      nested: [{ deep: "[redacted:LONG]" }, 7, null],
      "[redacted:SHORT]": true,
    });
    expect(input.text).toBe("v=abc123");
  });

  it("a redacting logger hides values in messages, fields and children's lines", () => {
    const lines: string[] = [];
    const held: [string, string][] = [["TOKEN", "t0p-s3cret"]];
    const log = redactingLogger(createLogger("t", { level: "debug", write: (l) => lines.push(l) }), () => held);
    log.info("got t0p-s3cret", { error: "failed with t0p-s3cret", n: 1 });
    log.child({ task_id: "tsk_1" }).debug("x", { list: ["t0p-s3cret"] });
    held.length = 0;
    log.info("later t0p-s3cret");
    expect(lines[0]).toContain("got [redacted:TOKEN]");
    expect(lines[0]).toContain("failed with [redacted:TOKEN]");
    expect(lines[1]).toContain('"list":["[redacted:TOKEN]"]');
    expect(lines[1]).toContain("tsk_1");
    // a value the broker forgot is no longer known to it
    expect(lines[2]).toContain("later t0p-s3cret");
  });

  it(
    "a stream cut anywhere comes out as the whole text redacted " +
      "at once, holding back only what could start a value",
    () => {
      const text = "a xx-abc123-yy b abc12 abc123abc123 c xx-abc123-y abc123";
      const whole = redactText(text, values);
      for (let i = 0; i <= text.length; i++) {
        for (let j = i; j <= text.length; j += 3) {
          const s = createStreamRedactor(() => values);
          const out = s.push(text.slice(0, i)) + s.push(text.slice(i, j)) + s.push(text.slice(j)) + s.end();
          expect(out, `cut at ${i} and ${j}`).toBe(whole);
        }
      }
      const s = createStreamRedactor(() => values);
      expect(s.push("plain text ending in ab")).toBe("plain text ending in ");
      expect(s.push("z" + "y".repeat(100_000)).length).toBe(100_003);
      expect(createStreamRedactor(() => []).push("abc1")).toBe("abc1");
    },
  );
});
