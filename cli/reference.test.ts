import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { renderReference } from "./reference.js";
import { COMMANDS, findCommand } from "./registry.js";

describe("the command table", () => {
  it("docs/cli.md carries the reference generated from it", () => {
    const doc = readFileSync(join(import.meta.dirname, "..", "docs", "cli.md"), "utf8");
    expect(doc).toContain(renderReference());
  });

  it("finds every command by its words, longest match first", () => {
    for (const c of COMMANDS) expect(findCommand([...c.path, "x"])?.spec.path).toEqual(c.path);
    expect(findCommand(["daemon", "up"])?.spec.path).toEqual(["daemon", "up"]);
    expect(findCommand(["daemon"])?.spec.path).toEqual(["daemon"]);
    expect(findCommand(["nope"])).toBeUndefined();
  });

  it("every command has a summary and an example that starts with its words", () => {
    for (const c of COMMANDS) {
      expect(c.summary.length).toBeGreaterThan(5);
      expect(c.example).toContain(["ep", ...c.path].join(" "));
    }
  });
});
