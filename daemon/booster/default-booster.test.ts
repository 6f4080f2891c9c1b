import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadBooster, type Booster } from "./booster.js";
import { DEFAULT_BOOSTER_WASM_BASE64 } from "./default-booster-bytes.js";
import { compileWat } from "../../test-support/wat-compiler.js";

const here = new URL("./", import.meta.url);

describe("embedded default booster", () => {
  it("the committed default-booster.wasm and its base64 copy match a fresh compile of the WAT", async () => {
    const fresh = await compileWat(await readFile(new URL("default-booster.wat", here), "utf8"), "default-booster.wat");
    const committed = new Uint8Array(await readFile(new URL("default-booster.wasm", here)));
    expect(Buffer.from(committed).equals(Buffer.from(fresh)), "run: node scripts/build-booster.mjs").toBe(true);
    expect(DEFAULT_BOOSTER_WASM_BASE64, "run: node scripts/build-booster.mjs").toBe(
      Buffer.from(fresh).toString("base64"),
    );
  });

  describe("verdicts", () => {
    let booster: Booster;
    beforeAll(async () => {
      booster = await loadBooster(undefined);
    });
    afterAll(() => booster.close());

    it("is named embedded", () => {
      expect(booster.source).toBe("embedded");
    });

    it.each([
      ["an empty object", {}],
      ["an empty array", []],
      ["null", null],
      ["missing arguments", undefined],
      ["an empty string", ""],
    ])("rejects %s as arguments", (_name, args) => {
      const v = booster.validate("create_mission", args);
      expect(v).toMatchObject({
        verdict: "reject",
        reason: "payload is empty: the tool arguments must have at least one field",
      });
    });

    it.each([
      ["one field", { title: "a" }],
      ["a nested empty object", { input: {} }],
      ["a nested empty array", { capabilities: [] }],
      ["a null field", { description: null }],
      ["an empty string field", { description: "" }],
      ["an array with an empty object", [{}]],
      ["a tool name that looks empty", { x: 1 }, 'a":{}}'],
    ])("allows %s", (_name, args, tool = "create_mission") => {
      expect(booster.validate(tool, args).verdict).toBe("allow");
    });

    it.each(["list_domains", "list_nodes", "list_pending_actions", "get_supervision"])(
      "allows the read tool %s with no arguments",
      (tool) => {
        for (const args of [{}, null, undefined])
          expect(booster.validate(tool, args).verdict, JSON.stringify(args)).toBe("allow");
      },
    );

    it.each(["create_domain", "signal_agent", "relist_things", "list", "get"])(
      "still rejects %s with no arguments (not a list_*/get_* read tool)",
      (tool) => {
        expect(booster.validate(tool, {})).toMatchObject({ verdict: "reject" });
      },
    );

    it("allows a large payload (memory grows to fit)", () => {
      expect(booster.validate("put_doc", { body: "x".repeat(300_000) }).verdict).toBe("allow");
    });
  });
});
