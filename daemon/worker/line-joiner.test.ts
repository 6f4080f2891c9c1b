import { describe, expect, it } from "vitest";
import { FakeClock } from "../../test-support/fake-clock.js";
import type { ProgressFrame } from "../runtimes/runtime.js";
import { createFrameBatcher } from "./frame-batcher.js";
import { createLineJoiner } from "./line-joiner.js";

const delta = (text: string, extra: Record<string, unknown> = {}): ProgressFrame => ({
  kind: "text",
  text,
  data: { delta: true, ...extra },
});

function joiner() {
  const clock = new FakeClock();
  const out: ProgressFrame[] = [];
  return { clock, out, lines: createLineJoiner({ clock, idleMs: 300, emit: (f) => out.push(f) }) };
}

describe("the line joiner", () => {
  it("joins streamed pieces into lines, letting a line out at its newline", () => {
    const { out, lines } = joiner();
    // gemini's deltas for "codeword pelican-773\nsecond line here", as the real CLI streamed them
    for (const piece of ["code", "word pelican-", "773", "\nsecond line", " here\n"]) lines.push(delta(piece));
    expect(out).toEqual([
      { kind: "text", text: "codeword pelican-773" },
      { kind: "text", text: "second line here" },
    ]);
  });

  it("lets a piece of line out when a frame of another kind comes, before that frame", () => {
    const { out, lines } = joiner();
    lines.push(delta("Let me look"));
    lines.push({ kind: "tool", text: "ls" });
    lines.push(delta("Done"));
    lines.flush();
    expect(out.map((f) => `${f.kind}:${f.text}`)).toEqual(["text:Let me look", "tool:ls", "text:Done"]);
  });

  it("lets a piece of line out after the stream is quiet for idleMs, not before", () => {
    const { clock, out, lines } = joiner();
    lines.push(delta("thinking"));
    clock.advance(200);
    lines.push(delta(" aloud"));
    clock.advance(299);
    expect(out).toEqual([]);
    clock.advance(1);
    expect(out).toEqual([{ kind: "text", text: "thinking aloud" }]);
  });

  it("keeps a thought's pieces apart from the reply's, and passes whole frames untouched", () => {
    const { out, lines } = joiner();
    lines.push(delta("I should ", { thought: true }));
    lines.push(delta("greet", { thought: true }));
    lines.push(delta("Hello"));
    lines.push({ kind: "text", text: "a whole line", data: { delta: false } });
    lines.push({ kind: "stderr", text: "warning: x" });
    expect(out).toEqual([
      { kind: "text", text: "I should greet", data: { thought: true } },
      { kind: "text", text: "Hello" },
      { kind: "text", text: "a whole line", data: { delta: false } },
      { kind: "stderr", text: "warning: x" },
    ]);
  });

  it("drops blank lines and cuts a line that never ends at maxChars", () => {
    const clock = new FakeClock();
    const out: ProgressFrame[] = [];
    const lines = createLineJoiner({ clock, idleMs: 300, maxChars: 10, emit: (f) => out.push(f) });
    lines.push(delta("para one\n\n\npara two"));
    lines.push(delta(" goes on and on"));
    expect(out.map((f) => f.text)).toEqual(["para one", "para two goes on and on"]);
  });
});

describe("the frame batcher", () => {
  it("joins before it redacts, so a secret streamed in two pieces is still hidden", async () => {
    const clock = new FakeClock();
    const sent: ProgressFrame[] = [];
    const batcher = createFrameBatcher({
      clock,
      windowMs: 50,
      redact: (f) => ({ ...f, text: f.text.replaceAll("hunter2", "[redacted]") }),
      send: async (frames) => void sent.push(...frames),
    });
    batcher.push(delta("the password is hun"));
    batcher.push(delta("ter2, keep it"));
    await batcher.flush();
    expect(sent).toEqual([{ kind: "text", text: "the password is [redacted], keep it" }]);
  });
});
