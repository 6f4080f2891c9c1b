// What a run of a task with parents (depends_on; docs/pipelines.md) gets of them: each parent as
// the tower has it (its result: output, exit code, branch), read once when the run starts;
// written as files in the run directory for shell steps (parents/<id>.out and .json, and by step
// name), summed up in a context block under an agent's prompt, and the branch a workspace ref
// `task:<id>` names. Only tasks with parents pay for this. The tower sends the parents with the
// assignment (TaskAssignment.parents, read in the claim's commit); a parent it did not send (a
// task claimed by epd itself, an older tower) is read with GetTask.
import { toJson, type JsonObject } from "@bufbuild/protobuf";
import { mkdirSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { EpError, invalidField, toEpError } from "../../common/errors.js";
import { TaskSchema, type Task } from "../../gen/ep/tower/v1/resources_pb.js";
import type { TowerClients } from "../link/tower-client.js";
import { PARENTS_DIR } from "./run-dirs.js";

export { PARENTS_DIR } from "./run-dirs.js";
/** How much of each parent's output the prompt's context block quotes (the rest: get_parent_results). */
const CONTEXT_OUTPUT = 2000;

/**
 * The task's parents as the tower has them, in depends_on order: those `given` with the
 * assignment, the others read now; a parent that cannot be read fails the run, naming it.
 */
export async function loadParents(
  tower: Pick<TowerClients, "work">,
  task: Task,
  given: readonly Task[] = [],
): Promise<Task[]> {
  const out: Task[] = [];
  for (const id of task.dependsOn) {
    const sent = given.find((p) => p.id === id);
    if (sent) {
      out.push(sent);
      continue;
    }
    try {
      const { task: p } = await tower.work.getTask({ taskId: id });
      if (p) out.push(p);
    } catch (err) {
      const e = toEpError(err);
      throw new EpError(
        e.errorClass === "unavailable" ? "unavailable" : "invalid_argument",
        `parent ${id} of task ${task.id} could not be read: ${e.message}`,
        { task_id: id },
      );
    }
  }
  return out;
}

/** A parent as its files and the context block say it: snake_case JSON of the task. */
const parentJson = (p: Task) => toJson(TaskSchema, p, { useProtoFieldName: true }) as JsonObject;

/**
 * parents/<id>.out (the output), parents/<id>.json (the whole task, result included) and the
 * same under the step's name when it has one, plus parents/index.json (the list). Returns the folder.
 * `leftovers`: the files a recycled run directory's parents/ holds (run-dirs.ts); they are renamed
 * and overwritten into these (a new file costs an inode, dearer than the rest), the rest removed.
 */
export function writeParentFiles(workDir: string, parents: readonly Task[], leftovers?: readonly string[]): string {
  const dir = join(workDir, PARENTS_DIR);
  if (!leftovers) mkdirSync(dir, { recursive: true, mode: 0o700 });
  const files: [string, string][] = [];
  for (const p of parents) {
    const names = [p.id, ...(p.step && /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(p.step) ? [p.step] : [])];
    for (const n of names)
      files.push([`${n}.out`, p.result?.output ?? ""], [`${n}.json`, `${JSON.stringify(parentJson(p), null, 2)}\n`]);
  }
  files.push([
    "index.json",
    `${JSON.stringify(
      parents.map((p) => ({ id: p.id, step: p.step, title: p.title })),
      null,
      2,
    )}\n`,
  ]);
  const wanted = new Set(files.map(([name]) => name));
  const there = new Set(leftovers);
  const spare = (leftovers ?? []).filter((name) => !wanted.has(name));
  for (const [name, text] of files) {
    const path = join(dir, name);
    const old = there.has(name) ? undefined : spare.pop();
    if (old !== undefined) renameSync(join(dir, old), path);
    writeFileSync(path, text, { mode: 0o600 });
  }
  for (const old of spare) unlinkSync(join(dir, old));
  return dir;
}

/** The block under an agent's prompt: which tasks came before, what they produced, where their branches are. */
export function parentContext(taskId: string, parents: readonly Task[]): string {
  if (!parents.length) return "";
  const lines = [
    "",
    "",
    "---",
    `Context from EP: this task (${taskId}) comes after ${parents.length} task(s) that ` +
      `succeeded. Their full results: the EP tool get_parent_results with task_id ${taskId}.`,
  ];
  for (const p of parents) {
    const ws = p.result?.workspace;
    const head = `- ${p.id}${p.step ? ` (step ${p.step})` : ""}: ${p.title}`;
    const where = ws?.branch ? ` — branch ${ws.branch} at ${ws.head.slice(0, 12)} in ${ws.repo}` : "";
    const output = (p.result?.output ?? "").trim();
    const quoted = output.length > CONTEXT_OUTPUT ? `${output.slice(0, CONTEXT_OUTPUT)}…` : output;
    lines.push(head + where, ...(quoted ? quoted.split("\n").map((l) => `    ${l}`) : []));
  }
  return lines.join("\n");
}

/**
 * The task's input with a workspace ref `task:<id>` replaced by that parent's branch (its head
 * when the branch is unknown): the child's worktree starts from the parent's commits. The same
 * input when it names no such ref.
 */
export function withParentRef(input: JsonObject | undefined, parents: readonly Task[]): JsonObject | undefined {
  const ws = input?.workspace;
  if (!ws || typeof ws !== "object" || Array.isArray(ws)) return input;
  const ref = (ws as JsonObject).ref;
  if (typeof ref !== "string" || !ref.startsWith("task:")) return input;
  const id = ref.slice("task:".length);
  const parent = parents.find((p) => p.id === id || (p.step !== "" && p.step === id));
  if (!parent)
    throw invalidField(
      "input.workspace.ref",
      `${ref} names no parent of this task (depends_on: ${parents.map((p) => p.id).join(", ") || "none"})`,
    );
  const pw = parent.result?.workspace;
  if (!pw?.head)
    throw invalidField(
      "input.workspace.ref",
      `${ref}: task ${parent.id} ran without a workspace, so it has no branch to start from`,
    );
  return { ...input, workspace: { ...(ws as JsonObject), ref: pw.branch || pw.head } };
}
