// The layout tools of `npm run format` and `npm run lint` (docs/house-style.md): the line-length
// check itself runs in `npm run lint`; these tests check that it and the wrapper do what they say.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

interface LongLine {
  file: string;
  line: number;
  width: number;
}
const longLinesMod = () =>
  import(new URL("../scripts/long-lines.mjs", import.meta.url).href) as Promise<{
    WIDTH: number;
    longLines(root: string, files?: string[]): LongLine[];
  }>;
const wrapMod = () =>
  import(new URL("../scripts/wrap-long-lines.mjs", import.meta.url).href) as Promise<{
    wrapSource(file: string, text: string): string;
  }>;

const words = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `word${from + i}`).join(" ");
const widest = (text: string) => Math.max(...text.split("\n").map((l) => [...l].length));
/** The value of `const x = …;` in `code` (plain JavaScript). */
const valueOf = (code: string) => new Function(`${code}\nreturn x;`)() as unknown;

describe("the line-length check", () => {
  it("reports lines over 120 characters with file and line, outside gen/, counting characters", async () => {
    const { longLines, WIDTH } = await longLinesMod();
    const root = mkdtempSync(join(tmpdir(), "ep-layout-"));
    mkdirSync(join(root, "gen"));
    mkdirSync(join(root, "common"));
    writeFileSync(
      join(root, "common", "a.ts"),
      `const ok = 1;\n// ${"x".repeat(WIDTH - 3)}\n// ${"y".repeat(WIDTH)}\n`,
    );
    writeFileSync(join(root, "common", "b.ts"), `// ${"—".repeat(WIDTH - 3)}\n`); // 120 characters, more bytes
    writeFileSync(join(root, "gen", "c.ts"), `// ${"z".repeat(300)}\n`);
    writeFileSync(join(root, "common", "notes.md"), `${"m".repeat(300)}\n`);
    execFileSync("git", ["init", "-q"], { cwd: root });
    expect(longLines(root).map((l) => [l.file, l.line, l.width])).toEqual([["common/a.ts", 3, WIDTH + 3]]);
  });
});

describe("wrapping what the formatter leaves", () => {
  it("reflows a // block: the overflow joins the next line of its paragraph; breaks and list items stay", async () => {
    const { wrapSource } = await wrapMod();
    const src = [
      `  // ${words(30)}`,
      "  // the end of the first paragraph.",
      "  //",
      `  // - a list item ${words(25, 100)}`,
      "  // - the next item",
      "  const a = 1;",
    ].join("\n");
    const out = wrapSource("x.ts", src);
    expect(widest(out)).toBeLessThanOrEqual(120);
    const lines = out.split("\n");
    expect(lines.filter((l) => l === "  //")).toHaveLength(1);
    expect(lines.filter((l) => l.startsWith("  // - "))).toHaveLength(2);
    expect(lines.some((l) => l.startsWith("  //   word"))).toBe(true); // the item's continuation, aligned
    const text = (t: string) => t.replace(/\s*\/\/\s*/g, " ").replace(/\s+/g, " ");
    expect(text(out)).toBe(text(src)); // the same words, in order
    expect(wrapSource("x.ts", out)).toBe(out); // a second run changes nothing
  });

  it("never cuts a word or a URL, and leaves short comments and tool directives alone", async () => {
    const { wrapSource } = await wrapMod();
    const url = `https://example.com/${"p".repeat(130)}`;
    const directive = `// biome-ignore lint/style/useConst: ${words(30)}`;
    const src = [`// see ${url} for more`, "//", "// short", directive, "let a = 1;"].join("\n");
    const out = wrapSource("x.ts", src).split("\n");
    expect(out.filter((l) => l.includes(url))).toHaveLength(1); // whole, on a line of its own start
    expect(out.some((l) => l.startsWith(`// ${url}`))).toBe(true);
    expect(out).toContain("// short");
    expect(out).toContain(directive);
  });

  it("turns a long one-line JSDoc into a block, and lifts a long trailing comment above its code", async () => {
    const { wrapSource } = await wrapMod();
    const src = [`/** ${words(28)} */`, "export const a = 1;", `const b = [1, 2, 3]; // ${words(25)}`].join("\n");
    const out = wrapSource("x.ts", src);
    expect(out.startsWith("/**\n * word0 ")).toBe(true);
    expect(out).toContain(" */\nexport const a = 1;");
    expect(out).toMatch(/\/\/ word0 [^\n]*\n\/\/ [^\n]*\nconst b = \[1, 2, 3\];$/);
    expect(widest(out)).toBeLessThanOrEqual(120);
  });

  it("does not read JSX text as a comment", async () => {
    const { wrapSource } = await wrapMod();
    const src = `const v = <p>\n  // ${words(30)}\n</p>;\n`;
    expect(wrapSource("x.tsx", src)).toBe(src);
  });

  it("cuts a long string or template at spaces into a concatenation of the same value", async () => {
    const { wrapSource } = await wrapMod();
    for (const literal of [`"${words(30)} it's \\"quoted\\" \\\\ end"`, `\`${words(12)} \${1 + 2} ${words(16)}\``]) {
      const src = `const x = ${literal};`;
      const out = wrapSource("x.mjs", src);
      expect(out).toMatch(/^const x = \((["`]).* \+ \1/);
      expect(valueOf(out)).toBe(valueOf(src));
    }
  });

  it("keeps literals the language needs whole: import paths, types, keys, tagged templates", async () => {
    const { wrapSource } = await wrapMod();
    const long = words(30);
    const src = [
      `import { a } from "./${long.replaceAll(" ", "-")}.js";`,
      `type T = "${long}";`,
      `const o = { "${long}": 1 };`,
      `const r = String.raw\`${long}\`;`,
    ].join("\n");
    expect(wrapSource("x.ts", src)).toBe(src);
  });
});
