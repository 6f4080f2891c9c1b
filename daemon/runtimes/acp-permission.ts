// How an ACP client answers an agent's session/request_permission: by the run's policy
// (decidePermission), or by a person (askPerson, permission = "ask"); a rejection becomes one of
// the run's denials. Split from acp-session.ts, which owns the connection.
import type { RequestPermissionRequest, RequestPermissionResponse } from "@agentclientprotocol/sdk";
import { realpathSync } from "node:fs";
import { basename, dirname, isAbsolute, join as joinPath, relative, resolve as resolvePath } from "node:path";
import type { Logger } from "../../common/log.js";
import type { Permission } from "./confine.js";
import { denialFrame, triedOf, type Denial, type DenialList } from "./denials.js";
import type { ProgressFrame, RunSpec } from "./runtime.js";

/** What answering a request needs of the session. */
export interface PermissionContext {
  permission: Permission;
  cwd: string;
  /** permission = "ask": a person decides (RunSpec.askPermission); without it "ask" rejects */
  askPermission?: RunSpec["askPermission"];
  permissionTimeoutMs?: number;
  logger: Logger;
}

/** The client's answer to session/request_permission (by policy, or a person's), reported as a status frame. */
export async function answerPermission(
  params: RequestPermissionRequest,
  o: PermissionContext,
  signal: AbortSignal,
  toolNames: ReadonlyMap<string, string>,
  emit: (frame: ProgressFrame) => void,
  denials: DenialList,
): Promise<RequestPermissionResponse> {
  const answer =
    o.permission === "ask"
      ? await askPerson(params, o, signal, toolNames)
      : decidePermission(params, o.permission, o.cwd);
  const chosen = answer.outcome.outcome === "selected" ? answer.outcome.optionId : "cancelled";
  emit({
    kind: "status",
    text: `permission ${chosen}: ${params.toolCall.title ?? params.toolCall.toolCallId}`,
    data: { toolCallId: params.toolCall.toolCallId, outcome: answer.outcome },
  });
  const refused = rejectionOf(params, answer, o.permission, toolNames);
  const added = refused && denials.add(refused);
  if (added) emit(denialFrame(added));
  return answer;
}

/**
 * A permission request answered with one of its reject options, as a denial (a person's under "ask", else the
 * policy's).
 */
export function rejectionOf(
  req: RequestPermissionRequest,
  answer: RequestPermissionResponse,
  policy: Permission,
  known?: ReadonlyMap<string, string>,
): Denial | undefined {
  const picked = answer.outcome.outcome === "selected" ? (answer.outcome as { optionId: string }).optionId : undefined;
  const kind = req.options.find((x) => x.optionId === picked)?.kind;
  if (!kind?.startsWith("reject")) return undefined;
  const person = policy === "ask";
  return {
    tool: toolOf(req, known),
    tried: triedOf(req.toolCall.rawInput) || (req.toolCall.title ?? ""),
    reason: person
      ? 'not allowed under permission = "ask" (a person said no, or no one answered in time)'
      : `refused by permission = ` +
        `"${policy}"${policy === "workspace" ? " (it changes a path outside the run's workspace)" : ""}`,
    source: person ? "person" : "policy",
    callId: req.toolCall.toolCallId,
  };
}

/**
 * The agent's own name for a tool call, when it gives one (claude-code-acp: _meta.claudeCode.toolName), else its kind.
 */
export function toolNameOf(call: { _meta?: unknown; kind?: string | null }): string | undefined {
  const named = (call._meta as { claudeCode?: { toolName?: unknown } } | null | undefined)?.claudeCode?.toolName;
  return typeof named === "string" && named ? named : (call.kind ?? undefined);
}

/**
 * The tool a permission request is for: named in the request, else in the `tool_call` update
 * that announced the call (`known`, by toolCallId; claude-code-acp names it only there).
 */
export function toolOf(req: RequestPermissionRequest, known?: ReadonlyMap<string, string>): string {
  return toolNameOf(req.toolCall) ?? known?.get(req.toolCall.toolCallId) ?? "tool";
}

/**
 * permission = "ask": the request goes before a person (RunSpec.askPermission, a tower approval)
 * and their choice is the answer; the agent waits meanwhile. No one to ask, or the tower
 * unreachable, is a rejection; a cancelled turn answers "cancelled", as ACP asks of a client.
 */
export async function askPerson(
  req: RequestPermissionRequest,
  o: Pick<PermissionContext, "askPermission" | "permissionTimeoutMs" | "logger">,
  signal: AbortSignal,
  known?: ReadonlyMap<string, string>,
): Promise<RequestPermissionResponse> {
  const option = (kinds: string[]) => kinds.map((k) => req.options.find((x) => x.kind === k)).find(Boolean);
  const selected = (id: string | undefined): RequestPermissionResponse =>
    id ? { outcome: { outcome: "selected", optionId: id } } : { outcome: { outcome: "cancelled" } };
  const rejectOption = () => selected(option(["reject_once", "reject_always"])?.optionId);
  if (!o.askPermission) {
    o.logger.warn('permission = "ask" but this run has no tower to ask; rejecting', { tool: toolOf(req, known) });
    return rejectOption();
  }
  const raw = req.toolCall.rawInput;
  try {
    const answer = await o.askPermission(
      {
        tool: toolOf(req, known),
        title: req.toolCall.title ?? "",
        arguments: raw && typeof raw === "object" && !Array.isArray(raw) ? (raw as Record<string, unknown>) : {},
        paths: [...new Set(pathsOf(req) ?? [])],
        options: req.options.map((x) => ({ optionId: x.optionId, name: x.name, kind: x.kind })),
        timeoutMs: o.permissionTimeoutMs ?? 600_000,
      },
      signal,
    );
    if (answer.optionId && req.options.some((x) => x.optionId === answer.optionId)) return selected(answer.optionId);
    return answer.approved ? selected(option(["allow_once", "allow_always"])?.optionId) : rejectOption();
  } catch (err) {
    if (signal.aborted) return { outcome: { outcome: "cancelled" } };
    o.logger.warn("could not ask for permission; rejecting", { error: (err as Error).message });
    return rejectOption();
  }
}

/** Tool kinds that change nothing, and those that change files (ACP's ToolKind). */
const READING_KINDS = ["read", "search", "think", "fetch"];
const CHANGING_KINDS = ["edit", "delete", "move"];

/**
 * Answers a permission request without a human: the policy picks an allow or a reject option
 * among those the agent offered.
 * - "workspace": edits, deletes and moves only when every path they name (toolCall.locations, or
 *   rawInput's file_path, path, paths, notebook_path…), symlinks resolved, lies inside the run's
 *   working directory (a change naming no path is refused); commands, reads and other tools (EP's
 *   MCP tools among them) are allowed: the process is confined (confine.ts), so a command cannot
 *   write outside the workspace anyway.
 * - "read-only": reads, searches and fetches only.
 * - "unconfined": everything (the "always" option when offered).
 * - "ask": decided by askPerson; here (no person to ask) it is a no.
 */
export function decidePermission(
  req: RequestPermissionRequest,
  policy: Permission,
  cwd: string,
): RequestPermissionResponse {
  const pick = (kinds: string[]) => kinds.map((k) => req.options.find((o) => o.kind === k)).find(Boolean);
  const kind = req.toolCall.kind ?? "other";
  let allow: boolean;
  switch (policy) {
    case "ask":
      allow = false;
      break;
    case "read-only":
      allow = READING_KINDS.includes(kind);
      break;
    case "unconfined":
      allow = true;
      break;
    case "workspace": {
      if (!CHANGING_KINDS.includes(kind)) allow = true;
      else {
        const named = pathsOf(req);
        allow = named !== undefined && named.every((p) => isInside(cwd, p));
      }
      break;
    }
  }
  const option = allow
    ? pick(policy === "unconfined" ? ["allow_always", "allow_once"] : ["allow_once", "allow_always"])
    : pick(["reject_once", "reject_always"]);
  return { outcome: option ? { outcome: "selected", optionId: option.optionId } : { outcome: "cancelled" } };
}

const PATH_KEYS = ["file_path", "filePath", "path", "notebook_path", "cwd", "directory", "dir"];

/**
 * Every path a permission request names, or undefined when it names nothing the policy can
 * check. A command counts as naming its cwd (the run's, unless rawInput.cwd says otherwise) plus
 * each word that looks like a path outside it (absolute, ~, or climbing with ..).
 */
export function pathsOf(req: RequestPermissionRequest): string[] | undefined {
  const out: string[] = [];
  for (const loc of req.toolCall.locations ?? []) if (typeof loc.path === "string") out.push(loc.path);
  const raw = req.toolCall.rawInput;
  let command = false;
  if (raw && typeof raw === "object" && !Array.isArray(raw)) {
    const r = raw as Record<string, unknown>;
    for (const k of PATH_KEYS) if (typeof r[k] === "string" && r[k]) out.push(r[k] as string);
    if (Array.isArray(r.paths)) for (const p of r.paths) if (typeof p === "string") out.push(p);
    if (typeof r.command === "string" && r.command.trim()) {
      command = true;
      for (const word of r.command.split(/[\s;|&<>()'"`=]+/)) {
        if (
          word.startsWith("/") ||
          word.startsWith("~") ||
          word === ".." ||
          word.startsWith("../") ||
          word.includes("/../") ||
          word.endsWith("/..")
        )
          out.push(word);
      }
    }
  }
  if (!out.length && !command) return undefined;
  if (!out.length) out.push("."); // a command with no path words runs in the run's directory
  return out;
}

/** Whether `path` (relative to dir, ~ never inside) lies in dir once both are resolved, symlinks included. */
function isInside(dir: string, path: string): boolean {
  if (path.startsWith("~")) return false;
  const base = realOrSelf(resolvePath(dir));
  const rel = relative(base, realOrSelf(resolvePath(dir, path)));
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
}

/** The real path of p, or of its deepest existing ancestor with the rest appended (a file not made yet). */
function realOrSelf(p: string): string {
  let head = p;
  const tail: string[] = [];
  for (;;) {
    try {
      return joinPath(realpathSync(head), ...tail.reverse());
    } catch {
      const parent = dirname(head);
      if (parent === head) return p;
      tail.push(basename(head));
      head = parent;
    }
  }
}
