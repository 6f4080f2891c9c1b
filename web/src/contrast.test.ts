// Both themes meet WCAG AA: every text colour against every background it is drawn on ≥ 4.5:1.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const css = readFileSync(new URL("./styles.css", import.meta.url), "utf8");

function themeVars(selector: string): Record<string, string> {
  const start = css.indexOf(selector);
  const block = css.slice(css.indexOf("{", start) + 1, css.indexOf("}", start));
  const vars: Record<string, string> = {};
  for (const m of block.matchAll(/--([a-z0-9-]+):\s*(#[0-9a-f]{6})\s*;/gi)) vars[m[1]] = m[2];
  return vars;
}

function luminance(hex: string): number {
  const [r, g, b] = [1, 3, 5]
    .map((i) => parseInt(hex.slice(i, i + 2), 16) / 255)
    .map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

function contrast(a: string, b: string): number {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

// [text, background] pairs as styles.css uses them
const PAIRS: [string, string][] = [
  ...["bg", "surface", "surface-2"].flatMap((bg): [string, string][] => [
    ["text", bg],
    ["muted", bg],
    ["error-text", bg],
    ["accent", bg],
  ]),
  ["primary-text", "primary-bg"],
  ["approve-text", "approve-bg"],
  ["reject-text", "reject-bg"],
  ["btn-text", "btn-bg"],
  ["ok-text", "ok-bg"],
  ["warn-text", "warn-bg"],
  ["bad-text", "bad-bg"],
  ["info-text", "info-bg"],
  ["neutral-text", "neutral-bg"],
  ["banner-text", "banner-bg"],
  ["user-text", "user-bg"],
];

describe.each([
  ["dark", ':root[data-theme="dark"]'],
  ["light", ':root[data-theme="light"]'],
])("%s theme", (_name, selector) => {
  const vars = themeVars(selector);
  it.each(PAIRS)("%s on %s reaches 4.5:1", (fg, bg) => {
    expect(vars[fg], fg).toMatch(/^#/);
    expect(vars[bg], bg).toMatch(/^#/);
    expect(contrast(vars[fg], vars[bg])).toBeGreaterThanOrEqual(4.5);
  });
});
