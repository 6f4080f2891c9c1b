#!/usr/bin/env node
// What Biome's formatter leaves over the line width, wrapped without changing what the code does
// (docs/house-style.md). Part of `npm run format` (scripts/format.mjs), which formats again after it.
// - `//` comment blocks and `/* */` / JSDoc comments: a long line's overflow moves to the start of
//   the next line of its paragraph (or a new line), keeping indentation, paragraph breaks, list
//   items, @tags and indented examples; words are never split, so URLs stay whole.
// - a `// comment` after code on a long line moves to its own line(s) above that code.
// - a long string or one-line template literal becomes a concatenation ("…" + "…") of pieces cut
//   at spaces, where the language allows an expression (not import paths, types, keys, enums,
//   tagged templates); `npx tsc` catches the rare literal type that a cut widens to string.
// Only lines over the width are touched, so a second run changes nothing.
// Usage: node scripts/wrap-long-lines.mjs [file…]   (default: every source file outside gen/)
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { sourceFiles, WIDTH, widthOf } from "./long-lines.mjs";

/** A comment or string piece is never cut shorter than this, so a deep indent still wraps. */
const MIN_PIECE = 40;
/** A line that starts a paragraph: a list item or a JSDoc tag. */
const STARTER = /^([-*•]|\d+[.)])\s|^@\w/;
/** Comments that are instructions to a tool: left as they are. */
const DIRECTIVE = /^\/\/\/|^\/\/\s*(@ts-|biome-ignore|eslint-|#region|#endregion)|^#!/;

const scriptKind = (file) =>
  file.endsWith(".tsx") ? ts.ScriptKind.TSX : file.endsWith(".ts") ? ts.ScriptKind.TS : ts.ScriptKind.JS;
const parse = (file, text) => ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, scriptKind(file));
const isLong = (line) => widthOf(line) > WIDTH;
const indentOf = (line) => /^\s*/.exec(line)[0];

/** Every comment of the file (the scanner's trivia, not JSX text that looks like one), by start. */
function commentsOf(sf) {
  const text = sf.text;
  const found = new Map();
  const jsxText = [];
  const add = (ranges) => {
    for (const r of ranges ?? []) found.set(r.pos, r);
  };
  const visit = (node) => {
    if (node.kind === ts.SyntaxKind.JsxText) {
      jsxText.push([node.pos, node.end]);
      return;
    }
    const children = node.getChildren(sf);
    if (children.length === 0 || node.kind === ts.SyntaxKind.EndOfFileToken) {
      add(ts.getLeadingCommentRanges(text, node.pos));
      add(ts.getTrailingCommentRanges(text, node.end));
    }
    for (const c of children) visit(c);
  };
  visit(sf);
  const inJsxText = (r) => jsxText.some(([from, to]) => r.pos >= from && r.pos < to);
  return [...found.values()].filter((r) => !inJsxText(r)).sort((a, b) => a.pos - b.pos);
}

/**
 * Where `line` (lead + body) may break: the last run of spaces that leaves the head within the
 * width and does not start the tail with something that would read as a new paragraph or close a
 * comment. Returns [head, tail] or undefined when no such space exists.
 */
function breakLine(lead, body) {
  const room = Math.max(WIDTH - widthOf(lead), MIN_PIECE);
  const chars = [...body];
  let best;
  let inCode; // the best break inside a `code span`, used only when there is none outside
  let ticks = 0;
  for (let i = 1; i < chars.length; i++) {
    if (chars[i - 1] === "`") ticks++;
    if (chars[i] !== " " || chars[i - 1] === " ") continue;
    if (i > room) break;
    let j = i;
    while (chars[j] === " ") j++;
    const tail = chars.slice(j).join("");
    if (tail === "" || STARTER.test(tail) || tail.startsWith("*/")) continue;
    if (ticks % 2 === 1) inCode = [chars.slice(0, i).join(""), tail];
    else best = [chars.slice(0, i).join(""), tail];
  }
  return best ?? inCode;
}

/**
 * The lines of one comment block, wrapped. `items` are {lead, body, kind}: kind "text" may take
 * words carried over from the line before when its lead matches; "keep" (a blank line, a fence, a
 * line inside a fence) is never merged into; a "start" begins a paragraph (list item, @tag).
 * `contLead(item)` is the lead of a line continuing that item.
 */
function reflow(items, contLead) {
  const out = [];
  let carry; // { lead, words }
  const emit = (lead, body) => {
    let rest = body;
    for (;;) {
      const line = lead + rest;
      if (!isLong(line)) return void out.push(line);
      const cut = breakLine(lead, rest);
      if (!cut) return void out.push(line);
      out.push(lead + cut[0]);
      rest = cut[1];
    }
  };
  const flush = () => {
    if (carry) emit(carry.lead, carry.words);
    carry = undefined;
  };
  for (const item of items) {
    let body = item.body;
    if (carry && item.kind === "text" && item.lead === carry.lead) {
      body = `${carry.words} ${body}`;
      carry = undefined;
    } else flush();
    const line = item.lead + body;
    if (item.kind === "keep" || !isLong(line)) {
      out.push(line);
      continue;
    }
    const cut = breakLine(item.lead, body);
    if (!cut) {
      out.push(line);
      continue;
    }
    out.push(item.lead + cut[0]);
    carry = { lead: contLead(item), words: cut[1] };
  }
  flush();
  return out;
}

/** Splits comment-body lines into items; `leadRe` matches a line's lead (marker and spaces). */
function itemsOf(lines, leadRe) {
  const items = [];
  let fenced = false;
  let paraLead;
  const leadOf = (line) => leadRe.exec(line)?.[0] ?? indentOf(line);
  const written = lines.filter((l) => l.slice(leadOf(l).length).trim() !== "");
  const base = Math.min(...written.map((l) => leadOf(l).length));
  for (const line of lines) {
    const lead = leadOf(line);
    const body = line.slice(lead.length).trimEnd();
    let kind = "text";
    if (body.startsWith("```")) {
      fenced = !fenced;
      kind = "keep";
    } else if (fenced || body === "") kind = "keep";
    else if (STARTER.test(body)) kind = "start";
    else if (lead.length > base && lead !== paraLead) kind = "pre"; // an indented example
    const item = { lead, body, kind };
    if (kind === "start") paraLead = contLeadOf(item);
    else if (kind === "text") paraLead = lead;
    else if (kind === "keep") paraLead = undefined;
    items.push(item);
  }
  return items;
}

function contLeadOf(item) {
  if (item.kind === "start") {
    const marker = /^(\S+\s+)/.exec(item.body)[1];
    return item.body.startsWith("@") ? `${item.lead}  ` : item.lead + " ".repeat(marker.length);
  }
  if (item.kind === "pre") return `${item.lead}  `;
  return item.lead;
}

/** Is the start of line `n` (0-based) a place where a `//` comment line may stand? */
function codeLineStart(sf, lineStarts, lines, n) {
  const pos = lineStarts[n] + indentOf(lines[n]).length;
  let node = sf;
  for (;;) {
    const child = node.getChildren(sf).find((c) => c.getStart(sf) <= pos && pos < c.end);
    if (!child) break;
    node = child;
  }
  if (node.getStart(sf) !== pos) return false; // inside a template, string or other token
  for (let p = node.parent; p; p = p.parent) {
    if (p.kind === ts.SyntaxKind.JsxExpression || p.kind === ts.SyntaxKind.JsxAttributes) return true;
    // JSX children: `//` is text
    if (p.kind === ts.SyntaxKind.JsxElement || p.kind === ts.SyntaxKind.JsxFragment) return false;
  }
  return true;
}

/** Comments: wraps `//` blocks and block comments with a long line, lifts long trailing comments. */
export function wrapComments(file, text) {
  const lines = text.split("\n");
  if (!lines.some(isLong)) return text;
  const sf = parse(file, text);
  const lineStarts = sf.getLineStarts();
  const lineOf = (pos) => sf.getLineAndCharacterOfPosition(pos).line;
  const replace = new Map(); // first line -> { count, lines }
  const ownLine = new Map(); // line -> comment, for `//` comments alone on their line
  for (const c of commentsOf(sf)) {
    const n = lineOf(c.pos);
    const own = text.slice(lineStarts[n], c.pos).trim() === "";
    const body = text.slice(c.pos, c.end);
    if (DIRECTIVE.test(body)) continue;
    if (c.kind === ts.SyntaxKind.SingleLineCommentTrivia) {
      if (own) ownLine.set(n, c);
      else if (isLong(lines[n]) && codeLineStart(sf, lineStarts, lines, n)) {
        const code = text.slice(lineStarts[n], c.pos).trimEnd();
        const indent = indentOf(lines[n]);
        const lifted = reflow(
          [{ lead: `${indent}// `, body: body.replace(/^\/\/\s?/, "").trim(), kind: "text" }],
          (i) => i.lead,
        );
        replace.set(n, { count: 1, lines: [...lifted, code] });
      }
      continue;
    }
    const last = lineOf(c.end);
    const after = text.slice(c.end, (lineStarts[last + 1] ?? text.length + 1) - 1);
    if (!own || after.trim() !== "" || !lines.slice(n, last + 1).some(isLong)) continue;
    replace.set(n, { count: last - n + 1, lines: wrapBlockComment(lines.slice(n, last + 1)) });
  }
  // runs of `//` lines with one indent
  const sorted = [...ownLine.keys()].sort((a, b) => a - b);
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    const indent = indentOf(lines[sorted[i]]);
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1 && indentOf(lines[sorted[j + 1]]) === indent) j++;
    const block = lines.slice(sorted[i], sorted[j] + 1);
    if (block.some(isLong)) {
      const items = itemsOf(block, /^\s*\/\/ ?\s*/);
      replace.set(sorted[i], { count: block.length, lines: reflow(items, contLeadOf) });
    }
    i = j + 1;
  }
  if (replace.size === 0) return text;
  const out = [];
  for (let n = 0; n < lines.length; ) {
    const r = replace.get(n);
    if (r) {
      out.push(...r.lines);
      n += r.count;
    } else out.push(lines[n++]);
  }
  return out.join("\n");
}

/** A block comment (its own lines) with a long line, as JSDoc-style lines within the width. */
function wrapBlockComment(block) {
  const indent = indentOf(block[0]);
  const open = block[0].trimStart().startsWith("/**") ? "/**" : "/*";
  if (block.length === 1) {
    const body = block[0].trim().slice(open.length, -2).trim();
    const items = [{ lead: `${indent} * `, body, kind: "text" }];
    return [indent + open, ...reflow(items, contLeadOf), `${indent} */`];
  }
  const first = block[0].trim().slice(open.length).trim();
  const lastLine = block[block.length - 1];
  const closing = lastLine.trim() === "*/";
  const middle = block.slice(1, closing ? -1 : undefined);
  if (!closing) middle[middle.length - 1] = lastLine.replace(/\s*\*\/\s*$/, "");
  const items = [];
  if (first) items.push({ lead: `${indent}${open} `, body: first, kind: "text" });
  const rest = itemsOf(middle, /^\s*\*(?!\/) ?\s*/);
  // the first line's overflow continues as a ` * ` line
  const starLead = rest.find((it) => it.kind === "text")?.lead ?? `${indent} * `;
  const cont = (item) => (item.lead.includes(open) ? starLead : contLeadOf(item));
  const lines = reflow([...items, ...rest], cont);
  if (!first) lines.unshift(block[0]);
  if (closing) lines.push(lastLine);
  else if (isLong(`${lines[lines.length - 1]} */`)) lines.push(`${indent} */`);
  else lines[lines.length - 1] += " */";
  return lines;
}

/** Contexts where a string literal must stay one literal (its type or the syntax needs it). */
function mustStayLiteral(node) {
  const p = node.parent;
  const K = ts.SyntaxKind;
  if (!p) return true;
  if (p.kind === K.ExpressionStatement) return true; // a directive ("use strict")
  if (
    (ts.isPropertyAssignment(p) ||
      ts.isPropertySignature(p) ||
      ts.isMethodDeclaration(p) ||
      ts.isPropertyDeclaration(p)) &&
    p.name === node
  )
    return true;
  if (ts.isEnumMember(p) || ts.isModuleDeclaration(p) || ts.isExternalModuleReference(p)) return true;
  if (ts.isTaggedTemplateExpression(p)) return true; // String.raw`…`, sql`…`: the tag sees the parts
  if (ts.isJsxAttribute(p) && /[\\&]/.test(node.getText())) return true; // JSX decodes entities, not escapes
  if (ts.isCallExpression(p)) {
    const callee = p.expression.getText();
    if (p.expression.kind === K.ImportKeyword || /^(require|vi\.mock|vi\.doMock)$|InlineSnapshot$/.test(callee))
      return true;
  }
  for (let a = p; a; a = a.parent) {
    if (ts.isImportDeclaration(a) || ts.isExportDeclaration(a) || ts.isImportTypeNode(a) || ts.isTypeNode(a))
      return true;
    if (ts.isStatement(a) || ts.isClassElement(a)) break;
  }
  return false;
}

/**
 * Cut points in a literal's source (indexes into `raw`, a cut goes before that character): after a
 * run of spaces, else before a `${…}` or after a `,` `;` `|`; never inside `${…}` or an escape.
 */
function cutPoints(node, raw) {
  const spans = [];
  if (ts.isTemplateExpression(node)) {
    const start = node.getStart();
    for (const s of node.templateSpans)
      spans.push([s.expression.getFullStart() - start - 2, s.literal.getStart() - start + 1]);
  }
  const inSpan = (i) => spans.some(([from, to]) => i > from && i < to);
  const escaped = (i) => {
    let slashes = 0;
    for (let k = i - 2; k >= 0 && raw[k] === "\\"; k--) slashes++;
    return slashes % 2 === 1;
  };
  const spaces = [];
  const others = spans.map(([from]) => from).filter((i) => i > 1);
  for (let i = 2; i < raw.length - 1; i++) {
    if (inSpan(i) || escaped(i)) continue;
    if (raw[i - 1] === " " && raw[i] !== " ") spaces.push(i);
    else if (",;|".includes(raw[i - 1]) && raw[i] !== " ") others.push(i);
  }
  return { spaces, others: others.sort((a, b) => a - b) };
}

/**
 * `raw` (a literal's source) as two or more pieces of at most `max` characters, cut at the points
 * nearest to equal lengths; undefined when the points do not allow it.
 */
function piecesOf(raw, { spaces, others }, max) {
  const len = raw.length - 2;
  for (const points of [spaces, [...spaces, ...others].sort((a, b) => a - b)]) {
    if (points.length === 0) continue;
    for (let k = Math.max(2, Math.ceil(len / max)); k <= points.length + 1; k++) {
      const bounds = [1];
      for (let i = 1; i < k; i++) {
        const target = 1 + Math.round((len * i) / k);
        let best;
        for (const p of points)
          if (p > bounds[bounds.length - 1] && (best === undefined || Math.abs(p - target) < Math.abs(best - target)))
            best = p;
        if (best !== undefined) bounds.push(best);
      }
      bounds.push(raw.length - 1);
      if (bounds.length < 3 || bounds.some((b, i) => i > 0 && b - bounds[i - 1] > max)) continue;
      const quote = raw[0];
      return bounds.slice(1).map((b, i) => quote + raw.slice(bounds[i], b) + quote);
    }
  }
  return undefined;
}

/** Strings and one-line templates on long lines, cut into concatenations (one per line per run). */
export function wrapStrings(file, text) {
  const lines = text.split("\n");
  if (!lines.some(isLong)) return text;
  const sf = parse(file, text);
  const lineOf = (pos) => sf.getLineAndCharacterOfPosition(pos).line;
  const candidates = new Map(); // long line -> its literals
  const visit = (node) => {
    const literal =
      ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateExpression(node);
    if (literal) {
      const start = node.getStart(sf);
      const n = lineOf(start);
      if (n === lineOf(node.end) && isLong(lines[n]) && node.end - start > MIN_PIECE && !mustStayLiteral(node)) {
        candidates.set(n, [...(candidates.get(n) ?? []), node]);
      }
    }
    node.forEachChild(visit);
  };
  visit(sf);
  const edits = [];
  for (const [n, nodes] of candidates) {
    // a piece goes on a line of its own, at most 4 deeper, with its quotes, " +" and a comma
    const max = Math.max(MIN_PIECE, WIDTH - indentOf(lines[n]).length - 10);
    // the longest literal that can be cut; one inside another is cut only if the outer cannot be
    for (const node of nodes.sort((a, b) => b.end - b.getStart(sf) - (a.end - a.getStart(sf)))) {
      const start = node.getStart(sf);
      const raw = text.slice(start, node.end);
      const pieces = piecesOf(raw, cutPoints(node, raw), max);
      if (!pieces) continue;
      const joined = pieces.join(" + ");
      edits.push([start, node.end, ts.isJsxAttribute(node.parent) ? `{${joined}}` : `(${joined})`]);
      break;
    }
  }
  edits.sort((a, b) => b[0] - a[0]);
  let out = text;
  for (const [from, to, expr] of edits) out = out.slice(0, from) + expr + out.slice(to);
  return out;
}

/** One run over a file's text: comments first, then strings (each on a fresh parse). */
export const wrapSource = (file, text) => wrapStrings(file, wrapComments(file, text));

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const files = process.argv.length > 2 ? process.argv.slice(2) : sourceFiles(process.cwd());
  const changed = [];
  for (const file of files) {
    const text = readFileSync(file, "utf8");
    const next = wrapSource(file, text);
    if (next !== text) {
      writeFileSync(file, next);
      changed.push(file);
    }
  }
  for (const f of changed) console.log(f);
}
