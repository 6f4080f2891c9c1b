// A task's workspace change on its page: the branch and commits, the changed files with their
// added and removed lines, and the patch, colored by line. The data is result.workspace
// (docs/workspaces.md); nothing here runs git.
import type { WorkspaceResult } from "@gen/ep/tower/v1/resources_pb.js";

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

export function WorkspaceChange({ ws }: { ws: WorkspaceResult }) {
  const files = filesOf(ws.patch);
  return (
    <section aria-labelledby="changes-heading" className="workspace-change">
      <h3 id="changes-heading">
        Changes <span className="muted small">{files.length === 1 ? "1 file" : `${files.length} files`}</span>
      </h3>
      <p className="small">
        Branch <code>{ws.branch}</code> from <code>{ws.base.slice(0, 12)}</code>
        {ws.committed ? (
          <>
            {" "}
            to <code>{ws.head.slice(0, 12)}</code> (committed)
          </>
        ) : (
          " (not committed)"
        )}{" "}
        in <code>{ws.name || ws.repo}</code>
        {ws.worktree && (
          <>
            ; worktree kept at <code>{ws.worktree}</code>
          </>
        )}
      </p>
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
        <pre className="task-output diff" aria-label="Patch">
          {ws.patch.split("\n").map((line, i) => (
            <span key={i} className={lineClass(line)}>
              {line}
              {"\n"}
            </span>
          ))}
        </pre>
      )}
      {ws.patchTruncated && <p className="muted small">The patch is cut at 64 KiB; the whole one is the task's artifact {ws.patchArtifact || "(not stored)"}.</p>}
    </section>
  );
}
