// A pipeline file (docs/pipelines.md): TOML with a `name` and `[[step]]` tables, read into steps
// in an order where every step comes after the steps it depends on. Every error found is
// reported at once, each with its line, as `ep agent cron reload` reports cron.toml; the first
// wrong file creates nothing.
import type { JsonObject } from "@bufbuild/protobuf";
import { parse, TomlError } from "smol-toml";
import { EpError } from "../../../common/errors.js";
import { keyLine, scanTableArray } from "../../../common/toml-lines.js";
import { CLAIM_POLICIES, RUNTIMES } from "./support.js";

export interface PipelineStep {
  name: string;
  title: string;
  description: string;
  runtime: string;
  /** an agent of the domain (id or name): the step is assigned to it */
  agent: string;
  claimPolicy: string;
  capabilities: string[];
  priority: number;
  maxAttempts: number;
  /** the task's input: prompt or command, and workspace */
  input: JsonObject;
  /** step names inside the file, or task ids (tsk_…) that exist already */
  dependsOn: string[];
  /** the step's `[[step]]` line, and the line of each key */
  line: number;
  lines: Partial<Record<string, number>>;
}

export interface PipelineFile {
  name: string;
  description: string;
  /** parents before children (the file's order where it allows) */
  steps: PipelineStep[];
}

export interface PipelineFileError {
  line: number;
  step?: string;
  field?: string;
  message: string;
}

export const STEP_FIELDS = [
  "name",
  "title",
  "description",
  "runtime",
  "agent",
  "claim_policy",
  "capabilities",
  "priority",
  "max_attempts",
  "prompt",
  "command",
  "workspace",
  "depends_on",
] as const;
const TOP_FIELDS = ["name", "description", "step"];
const STEP_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const MAX_STEPS = 1000;

/** The refusal of a file: every error, each as `file:line: …`, in one pipeline_invalid. */
export function pipelineRefused(fileName: string, errors: PipelineFileError[]): EpError {
  const sorted = [...errors].sort((a, b) => a.line - b.line);
  const message = sorted
    .map((e) => `${fileName}:${e.line}: ${e.step ? `step "${e.step}": ` : ""}${e.message}`)
    .join("\n");
  return new EpError("pipeline_invalid", message, { file: fileName, errors: sorted.map((e) => ({ ...e })) });
}

/** Parses and checks a pipeline file; throws pipeline_invalid with every error found. */
export function parsePipelineFile(text: string, fileName: string): PipelineFile {
  let doc: Record<string, unknown>;
  try {
    doc = parse(text) as Record<string, unknown>;
  } catch (err) {
    if (!(err instanceof TomlError))
      throw pipelineRefused(fileName, [{ line: 1, message: `cannot parse: ${String(err)}` }]);
    throw pipelineRefused(fileName, [
      {
        line: err.line,
        message: `TOML syntax error: ${err.message.split("\n")[0].replace(/^Invalid TOML document:\s*/i, "")}`,
      },
    ]);
  }
  const errors: PipelineFileError[] = [];
  for (const key of Object.keys(doc)) {
    if (!TOP_FIELDS.includes(key))
      errors.push({
        line: keyLine(text, key) ?? 1,
        field: key,
        message: `unknown key "${key}"; a pipeline file has name, description and [[step]] tables`,
      });
  }
  const str = (v: unknown) => (typeof v === "string" ? v.trim() : "");
  if (doc.name !== undefined && typeof doc.name !== "string")
    errors.push({ line: keyLine(text, "name") ?? 1, field: "name", message: "name must be a string" });
  const raw = doc.step;
  if (raw === undefined || (Array.isArray(raw) && !raw.length))
    errors.push({ line: 1, message: "no steps: add [[step]] tables (name, and prompt or command)" });
  else if (!Array.isArray(raw) || raw.some((s) => typeof s !== "object" || s === null || Array.isArray(s)))
    errors.push({ line: keyLine(text, "step") ?? 1, field: "step", message: "step must be [[step]] tables" });
  else if (raw.length > MAX_STEPS) errors.push({ line: 1, message: `at most ${MAX_STEPS} steps (got ${raw.length})` });
  if (errors.length) throw pipelineRefused(fileName, errors);

  const blocks = scanTableArray(text, "step");
  const steps = (raw as Record<string, unknown>[]).map((table, i) =>
    readStep(text, table, blocks[i] ?? { header: 1, start: 1, end: Number.MAX_SAFE_INTEGER }, errors),
  );
  checkGraph(steps, errors);
  if (errors.length) throw pipelineRefused(fileName, errors);
  return { name: str(doc.name), description: str(doc.description), steps: topoOrder(steps) };
}

function readStep(
  text: string,
  t: Record<string, unknown>,
  block: { header: number; start: number; end: number },
  errors: PipelineFileError[],
): PipelineStep {
  const lines: Partial<Record<string, number>> = {};
  for (const k of Object.keys(t)) lines[k] = keyLine(text, k, block.start, block.end) ?? block.header;
  const name = typeof t.name === "string" ? t.name.trim() : "";
  const err = (field: string | undefined, message: string) =>
    errors.push({ line: (field && lines[field]) || block.header, step: name || undefined, field, message });
  for (const k of Object.keys(t))
    if (!(STEP_FIELDS as readonly string[]).includes(k))
      err(k, `unknown field "${k}" (a step takes ${STEP_FIELDS.join(", ")})`);
  const string = (k: string): string => {
    const v = t[k];
    if (v === undefined) return "";
    if (typeof v !== "string") {
      err(k, `${k} must be a string`);
      return "";
    }
    return v.trim();
  };
  if (t.name === undefined) err(undefined, "missing field name (a step's name, unique in the file)");
  else if (!STEP_NAME.test(name))
    err(
      "name",
      `name ${JSON.stringify(t.name)} must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit`,
    );
  let runtime = string("runtime");
  const prompt = string("prompt");
  const command = string("command");
  if (runtime && !(RUNTIMES as readonly string[]).includes(runtime) && runtime !== "shell")
    err("runtime", `runtime "${runtime}" is not one of ${[...RUNTIMES].join(", ")}`);
  if (command && !runtime) runtime = "shell";
  if (runtime === "shell" && !command)
    err(lines.runtime ? "runtime" : undefined, "missing field command (a shell step runs a command)");
  if (runtime === "shell" && prompt) err("prompt", "a shell step takes command, not prompt");
  if (runtime !== "shell" && command) err("command", `command is for shell steps; runtime ${runtime} takes a prompt`);
  if (!prompt && !command && runtime !== "shell")
    err(undefined, "missing field prompt or command (what the step does: an agent's prompt, or a shell command)");
  const claimPolicy = string("claim_policy");
  if (claimPolicy && !(CLAIM_POLICIES as readonly string[]).includes(claimPolicy))
    err("claim_policy", `claim_policy "${claimPolicy}" is not one of ${CLAIM_POLICIES.join(", ")}`);
  const agent = string("agent");
  if (claimPolicy === "assigned" && !agent)
    err("claim_policy", "claim_policy assigned needs agent (the agent's name or id)");
  if (agent && claimPolicy && claimPolicy !== "assigned")
    err("agent", `agent assigns the step; it cannot be ${claimPolicy} as well`);
  const intIn = (k: string, min: number, max: number, dflt: number): number => {
    const v = t[k];
    if (v === undefined) return dflt;
    if (typeof v !== "bigint" && typeof v !== "number") return (err(k, `${k} must be a whole number`), dflt);
    const n = Number(v);
    if (!Number.isInteger(n) || n < min || n > max)
      return (err(k, `${k} must be between ${min} and ${max} (got ${n})`), dflt);
    return n;
  };
  const list = (k: string): string[] => {
    const v = t[k];
    if (v === undefined) return [];
    if (!Array.isArray(v) || v.some((x) => typeof x !== "string" || !x.trim()))
      return (err(k, `${k} must be a list of names, like ["plan"]`), []);
    return v.map((x: string) => x.trim());
  };
  const input: JsonObject = runtime === "shell" ? { command } : { prompt };
  const ws = t.workspace;
  if (ws !== undefined) {
    if (typeof ws === "string" && ws.trim()) input.workspace = ws.trim();
    else if (typeof ws === "object" && ws !== null && !Array.isArray(ws) && !(ws instanceof Date)) {
      const w = ws as Record<string, unknown>;
      const bad = Object.keys(w).find((k) => !["repo", "ref", "branch"].includes(k) || typeof w[k] !== "string");
      if (bad) err("workspace", `workspace.${bad}: workspace is {repo, ref?, branch?} with string values`);
      else if (!w.repo) err("workspace", "workspace needs repo (a path or a workspaces.toml name)");
      else input.workspace = w as JsonObject;
    } else err("workspace", "workspace must be a repository (a path or name) or {repo, ref?, branch?}");
  }
  return {
    name,
    title: string("title") || name,
    description: string("description"),
    runtime,
    agent,
    claimPolicy: agent ? "assigned" : claimPolicy || "first_claim",
    capabilities: list("capabilities"),
    priority: intIn("priority", -(2 ** 31), 2 ** 31 - 1, 0),
    maxAttempts: intIn("max_attempts", 1, 100, 0),
    input,
    dependsOn: list("depends_on"),
    line: block.header,
    lines,
  };
}

/** The ref a step's workspace starts from when it names another step: "task:<step>". */
export function stepRef(s: PipelineStep): string | undefined {
  const ws = s.input.workspace;
  const ref = ws && typeof ws === "object" && !Array.isArray(ws) ? (ws as JsonObject).ref : undefined;
  return typeof ref === "string" && ref.startsWith("task:") ? ref.slice("task:".length) : undefined;
}

/**
 * Names unique, depends_on naming steps of the file (or tsk_ ids), no cycle, a task: ref among the step's ancestors.
 */
function checkGraph(steps: PipelineStep[], errors: PipelineFileError[]): void {
  const byName = new Map<string, PipelineStep>();
  for (const s of steps) {
    if (!s.name) continue;
    const first = byName.get(s.name);
    if (first)
      errors.push({
        line: s.lines.name ?? s.line,
        step: s.name,
        field: "name",
        message: `a second step named "${s.name}" (the first is on line ${first.line})`,
      });
    else byName.set(s.name, s);
  }
  const names = [...byName.keys()].join(", ");
  for (const s of steps) {
    for (const d of s.dependsOn) {
      if (!byName.has(d) && !d.startsWith("tsk_"))
        errors.push({
          line: s.lines.depends_on ?? s.line,
          step: s.name,
          field: "depends_on",
          message:
            `depends_on names unknown step "${d}" (the steps are ` +
            `${names}; a task outside the file is named by its tsk_ id)`,
        });
      if (d === s.name)
        errors.push({
          line: s.lines.depends_on ?? s.line,
          step: s.name,
          field: "depends_on",
          message: "a step cannot depend on itself",
        });
    }
  }
  const cycle = findCycle(steps, byName);
  if (cycle) {
    const s = byName.get(cycle[0])!;
    errors.push({
      line: s.lines.depends_on ?? s.line,
      step: s.name,
      field: "depends_on",
      message: `depends_on makes a cycle: ${cycle.join(" → ")}`,
    });
  }
  for (const s of steps) {
    const ref = stepRef(s);
    if (ref === undefined || ref.startsWith("tsk_")) continue;
    if (!byName.has(ref))
      errors.push({
        line: s.lines.workspace ?? s.line,
        step: s.name,
        field: "workspace",
        message: `workspace.ref "task:${ref}" names unknown step "${ref}"`,
      });
    else if (!cycle && !ancestors(s, byName).has(ref))
      errors.push({
        line: s.lines.workspace ?? s.line,
        step: s.name,
        field: "workspace",
        message: `workspace.ref "task:${ref}": the step must depend on "${ref}" (its branch exists once it succeeded)`,
      });
  }
}

function findCycle(steps: PipelineStep[], byName: Map<string, PipelineStep>): string[] | undefined {
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (s: PipelineStep): string[] | undefined => {
    state.set(s.name, "open");
    path.push(s.name);
    for (const d of s.dependsOn) {
      if (d === s.name) continue;
      const p = byName.get(d);
      if (!p) continue;
      if (state.get(d) === "open") return [...path.slice(path.indexOf(d)), d];
      if (!state.has(d)) {
        const found = visit(p);
        if (found) return found;
      }
    }
    path.pop();
    state.set(s.name, "done");
    return undefined;
  };
  for (const s of steps)
    if (s.name && !state.has(s.name)) {
      const found = visit(s);
      if (found) return found;
    }
  return undefined;
}

function ancestors(s: PipelineStep, byName: Map<string, PipelineStep>): Set<string> {
  const seen = new Set<string>();
  const walk = (x: PipelineStep) => {
    for (const d of x.dependsOn) {
      const p = byName.get(d);
      if (p && !seen.has(d)) {
        seen.add(d);
        walk(p);
      }
    }
  };
  walk(s);
  return seen;
}

/** Parents before children, otherwise the file's order. */
function topoOrder(steps: PipelineStep[]): PipelineStep[] {
  const byName = new Map(steps.map((s) => [s.name, s]));
  const out: PipelineStep[] = [];
  const placed = new Set<string>();
  const place = (s: PipelineStep) => {
    if (placed.has(s.name)) return;
    placed.add(s.name);
    for (const d of s.dependsOn) {
      const p = byName.get(d);
      if (p) place(p);
    }
    out.push(s);
  };
  steps.forEach(place);
  return out;
}
