import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, getTextEncoding } from "@bufbuild/protobuf/wire";
import { describe, expect, it, vi } from "vitest";
import { TaskSchema } from "../gen/ep/tower/v1/resources_pb.js";

const samples = [
  "",
  "tsk_01JXXXXXXXXXXXXXXXXXXXXXXX",
  "héllo wörld",
  "日本語のタイトル",
  "emoji 🚀 and 👩‍💻",
  "lone \ud800 high",
  "lone \udc00 low",
  "x".repeat(10_000),
  "ü".repeat(5_000),
];
const SLOT = Symbol.for("@bufbuild/protobuf/text-encoding");
const slots = globalThis as unknown as Record<symbol, unknown>;

/** The encoder protobuf-es writes with once `entry` is imported in a fresh module registry. */
async function encoderAfter(entry: string) {
  delete slots[SLOT];
  vi.resetModules();
  await import(entry);
  const active = getTextEncoding().encodeUtf8; // before this file imports the module itself
  const { encodeUtf8 } = await import("./protobuf-text.js");
  return { active, encodeUtf8 };
}

describe("protobuf strings", () => {
  it("is what the tower and epd write binary messages with", async () => {
    for (const entry of ["../tower/app.js", "../daemon/link/tower-client.js"]) {
      const { active, encodeUtf8 } = await encoderAfter(entry);
      expect(active, entry).toBe(encodeUtf8);
      expect((new BinaryWriter() as unknown as { encodeUtf8: unknown }).encodeUtf8, entry).toBe(encodeUtf8);
    }
  });

  it("writes every string as TextEncoder does", async () => {
    const { encodeUtf8 } = await import("./protobuf-text.js");
    const te = new TextEncoder();
    for (const s of samples) expect(Buffer.from(encodeUtf8(s)), JSON.stringify(s)).toEqual(Buffer.from(te.encode(s)));
  });

  it("round-trips a message's strings (a lone surrogate as U+FFFD, as before)", async () => {
    await import("./protobuf-text.js");
    for (const s of samples) {
      const back = fromBinary(TaskSchema, toBinary(TaskSchema, create(TaskSchema, { id: s, capabilities: [s, "b"] })));
      const wellFormed = s.replace(/\p{Surrogate}/gu, "\ufffd");
      expect(back.id).toBe(wellFormed);
      expect(back.capabilities).toEqual([wellFormed, "b"]);
    }
  });

  it("keeps each string's bytes its own (pooled slices are copied out)", async () => {
    await import("./protobuf-text.js");
    const a = toBinary(TaskSchema, create(TaskSchema, { id: "a".repeat(40), title: "first" }));
    const b = toBinary(TaskSchema, create(TaskSchema, { id: "b".repeat(40), title: "second" }));
    expect(fromBinary(TaskSchema, a)).toMatchObject({ id: "a".repeat(40), title: "first" });
    expect(fromBinary(TaskSchema, b)).toMatchObject({ id: "b".repeat(40), title: "second" });
  });
});
