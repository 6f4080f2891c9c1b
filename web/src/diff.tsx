// A task's workspace change on its page: the branch and commits, the changed files with their
// added and removed lines, and the patch, colored by line; for a succeeded task, a Merge button
// (WorkService.MergeTask: the node that ran it merges). The data is result.workspace
// (docs/workspaces.md); nothing here runs git.
import { ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "@gen/ep/errors/v1/errors_pb.js";
import type { WorkspaceResult } from "@gen/ep/tower/v1/resources_pb.js";
import { MergeOutcome, type MergeTaskResponse } from "@gen/ep/tower/v1/work_pb.js";
import { useState } from "react";
import { api, describeError } from "./api.js";

interface FileChange {
  path: string;
  added: number;
  removed: number;
}

/** The files of a unified diff, with their +/- line counts. */
export function filesOf(patch: string): FileChange[] {
  const files: FileChange[] = [];
  let current: FileChange | undefined;
  for (const line of patch.split("\n")) {
    const header = /^diff --git a\/(.+) b\/(.+)$/.exec(line);
    if (header) {
      current = { path: header[2], added: 0, removed: 0 };
      files.push(current);
    } else if (current && line.startsWith("+") && !line.startsWith("+++")) current.added++;
    else if (current && line.startsWith("-") && !line.startsWith("---")) current.removed++;
  }
  return files;
}

function lineClass(line: string): string | undefined {
  if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff --git")) return "diff-file";
  if (line.startsWith("+")) return "diff-add";
  if (line.startsWith("-")) return "diff-del";
  if (line.startsWith("@@")) return "diff-hunk";
  return undefined;
}

/** The merge's outcome in one sentence. */
function mergedText(r: MergeTaskResponse): string {
  const was = `${r.into} was ${r.previous.slice(0, 12)}${r.checkout ? `; files updated in ${r.checkout}` : ""}`;
  if (r.outcome === MergeOutcome.FAST_FORWARD)
    return `Merged into ${r.into} (fast-forward): ${r.into} is now ${r.tip.slice(0, 12)} (${was}).`;
  if (r.outcome === MergeOutcome.MERGE_COMMIT)
    return `Merged into ${r.into} with merge commit ${r.tip.slice(0, 12)} (${was}).`;
  return `${r.into} already contains ${r.branch}; nothing changed.`;
}

/** Merge into the base branch, and what came of it (the refused files listed). */
function MergeAction({ taskId, ws }: { taskId: string; ws: WorkspaceResult }) {
  const [busy, setBusy] = useState(false);
  const [note, setNote] = useState<{ ok: boolean; text: string; files?: string[] }>();
  const merge = async () => {
    setBusy(true);
    setNote(undefined);
    try {
      setNote({ ok: true, text: mergedText(await api.work.mergeTask({ taskId })) });
    } catch (err) {
      const files = err instanceof ConnectError ? err.findDetails(ErrorDetailSchema)[0]?.details?.files : undefined;
      setNote({
        ok: false,
        text: `Not merged: ${describeError(err)}`,
        files: Array.isArray(files) ? files.map(String) : undefined,
      });
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="merge-action">
      <button type="button" className="btn btn-primary" disabled={busy} onClick={() => void merge()}>
        {busy ? "Merging…" : `Merge into ${ws.baseBranch}`}
      </button>
      {note && (
        <div className={note.ok ? "muted small" : "error-note"} role={note.ok ? "status" : "alert"}>
          {note.text}
          {note.files && note.files.length > 0 && (
            <ul aria-label="Conflicting files">
              {note.files.map((f) => (
                <li key={f}>
                  <code>{f}</code>
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
    </div>
  );
}

/** Who made the branch's commits (results before commits were listed say only whether the agent committed). */
function Commits({ ws }: { ws: WorkspaceResult }) {
  if (!ws.commits.length) {
    const made = ws.committed ? "The agent committed on the branch." : "epd committed what the run left uncommitted.";
    return <p className="muted small">{ws.head && ws.head !== ws.base ? made : "No commits on the branch."}</p>;
  }
  return (
    <ol className="small branch-commits" aria-label="Commits">
      {ws.commits.map((c) => (
        <li key={c.sha}>
          <code>{c.sha.slice(0, 12)}</code> {c.subject} <span className="muted">— {c.author}</span>
          {c.byEpd && <span className="muted"> (epd: what the run left uncommitted)</span>}
        </li>
      ))}
    </ol>
  );
}

/** `taskId` when the task succeeded and the person may merge: the Merge button shows. */
export function WorkspaceChange({ ws, mergeable }: { ws: WorkspaceResult; mergeable?: string }) {
  const files = filesOf(ws.patch);
  return (
    <section aria-labelledby="changes-heading" className="workspace-change">
      <h3 id="changes-heading">
        Changes <span className="muted small">{files.length === 1 ? "1 file" : `${files.length} files`}</span>
      </h3>
      <p className="small">
        Branch <code>{ws.branch}</code> from {ws.baseBranch && <code>{ws.baseBranch}</code>} at{" "}
        <code>{ws.base.slice(0, 12)}</code>, head <code>{ws.head.slice(0, 12)}</code>, in{" "}
        <code>{ws.name || ws.repo}</code>
        {ws.worktree && (
          <>
            ; worktree kept at <code>{ws.worktree}</code> (the patch includes what is uncommitted there)
          </>
        )}
      </p>
      <Commits ws={ws} />
      {mergeable &&
        ws.head !== ws.base &&
        (ws.baseBranch ? (
          <MergeAction taskId={mergeable} ws={ws} />
        ) : (
          <p className="muted small">
            The base was not a branch: merge with <code>ep task merge {mergeable} --into &lt;branch&gt;</code>.
          </p>
        ))}
      {files.length > 0 ? (
        <table className="changed-files" aria-label="Changed files">
          <thead>
            <tr>
              <th scope="col">File</th>
              <th scope="col">Added</th>
              <th scope="col">Removed</th>
            </tr>
          </thead>
          <tbody>
            {files.map((f) => (
              <tr key={f.path}>
                <td>
                  <code>{f.path}</code>
                </td>
                <td className="diff-add">+{f.added}</td>
                <td className="diff-del">−{f.removed}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p className="muted small">No changes.</p>
      )}
      {ws.patch && (
        // biome-ignore lint/a11y/useAriaPropsSupportedByRole: console a11y follow-up (issue 36)
        <pre className="task-output diff" aria-label="Patch">
          {ws.patch.split("\n").map((line, i) => (
            <span key={i} className={lineClass(line)}>
              {line}
              {"\n"}
            </span>
          ))}
        </pre>
      )}
      {ws.patchTruncated && (
        <p className="muted small">
          The patch is cut at 64 KiB; the whole one is the task's artifact {ws.patchArtifact || "(not stored)"}.
        </p>
      )}
    </section>
  );
}
