// Malformed workspace input, each refused with an error naming what was wrong: a task's
// input.workspace and the daemon's workspaces.toml.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { commitAuthor, leftoverMessage, loadWorkspaces, workspaceSpecOf } from "./workspace.js";

const homes: string[] = [];
afterEach(() => {
  for (const h of homes.splice(0)) rmSync(h, { recursive: true, force: true });
});

function withToml(text: string): string {
  const home = mkdtempSync(join(tmpdir(), "ep-ws-unit-"));
  homes.push(home);
  writeFileSync(join(home, "workspaces.toml"), text);
  return home;
}

const errorOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    return err as { code: string; message: string; details?: { field?: string } };
  }
  throw new Error("no error");
};

describe("input.workspace", () => {
  it("takes a repo string or {repo, ref?, branch?}, and names the field it refuses", () => {
    expect(workspaceSpecOf({})).toBeUndefined();
    expect(workspaceSpecOf({ workspace: " web " })).toEqual({ repo: "web" });
    expect(workspaceSpecOf({ workspace: { repo: " web ", ref: "main", branch: "fix/x" } })).toEqual({
      repo: "web",
      ref: "main",
      branch: "fix/x",
    });
    for (const [input, field] of [
      [{ workspace: 5 }, "input.workspace"],
      [{ workspace: " " }, "input.workspace.repo"],
      [{ workspace: [] }, "input.workspace"],
      [{ workspace: { repo: "" } }, "input.workspace.repo"],
      [{ workspace: { repo: "web", colour: "red" } }, "input.workspace.colour"],
      [{ workspace: { repo: "web", ref: 3 } }, "input.workspace.ref"],
      [{ workspace: { repo: "web", branch: "-rf" } }, "input.workspace.branch"],
      [{ workspace: { repo: "web", branch: "a b" } }, "input.workspace.branch"],
    ] as const) {
      expect(errorOf(() => workspaceSpecOf(input as Record<string, unknown>))).toMatchObject({
        code: "invalid_argument",
        details: { field },
      });
    }
  });
});

describe("workspaces.toml", () => {
  it("reads names, refs, setup commands and keep_failed", () => {
    const home = withToml(
      `[web]\npath = "/srv/web"\nref = "main"\nsetup = "npm ci"\nkeep_failed = "12h"\n[api]\npath = "/srv/api"\n`,
    );
    const ws = loadWorkspaces(home);
    expect(ws.get("web")).toEqual({
      name: "web",
      path: "/srv/web",
      ref: "main",
      setup: "npm ci",
      keepFailedMs: 12 * 3_600_000,
    });
    expect(ws.get("api")?.keepFailedMs).toBe(7 * 86_400_000);
  });

  it("refuses a malformed file, naming the line, table or key", () => {
    for (const [text, message] of [
      [`[web\npath = "/srv"\n`, /^workspaces\.toml \(line 1\): /],
      [`web = 3\n`, /^workspaces\.toml \[web\]: must be a table/],
      [`[web]\nref = "main"\n`, /^workspaces\.toml \[web\]\.path: must be an absolute path/],
      [`[web]\npath = "relative/dir"\n`, /\[web\]\.path: must be an absolute path/],
      [`[web]\npath = "/srv"\ncolour = "red"\n`, /\[web\]\.colour: no such key/],
      [`[web]\npath = "/srv"\nsetup = 1\n`, /\[web\]\.setup: must be a string/],
      [`[web]\npath = "/srv"\nkeep_failed = "soon"\n`, /\[web\]\.keep_failed: must be a duration/],
      [`[web]\npath = "/srv"\nauthor = "just a name"\n`, /\[web\]\.author: must be "Name <email>"/],
    ] as const) {
      const err = errorOf(() => loadWorkspaces(withToml(text)));
      expect(err.code, text).toBe("config_invalid");
      expect(err.message, text).toMatch(message);
    }
  });
});

describe("commit authors", () => {
  it("is the setting with {agent} filled in, else EP agent <name>; a malformed EP_GIT_AUTHOR is refused", () => {
    expect(commitAuthor("{agent} via EP <bots@example.com>", "coder")).toEqual({
      name: "coder via EP",
      email: "bots@example.com",
    });
    expect(commitAuthor(undefined, "coder")).toEqual({ name: "EP agent coder", email: "ep@localhost" });
    expect(errorOf(() => commitAuthor("nobody", "coder"))).toMatchObject({
      code: "config_invalid",
      message: expect.stringContaining('must be "Name <email>"'),
    });
    expect(loadWorkspaces(withToml(`[web]\npath = "/srv"\nauthor = "Bots <b@x>"\n`)).get("web")?.author).toBe(
      "Bots <b@x>",
    );
  });

  it("epd's commit of leftovers names the task and agent, its title cut to one short line", () => {
    const id = {
      taskTitle: `${"x".repeat(80)}\nmore`,
      agentId: "agt_1",
      agentName: "coder",
      who: { name: "n", email: "e" },
    };
    const [subject, , trailers] = leftoverMessage("tsk_1", id);
    expect(subject).toBe(`ep: ${"x".repeat(59)}… (task tsk_1, agent coder)`);
    expect(trailers).toBe("EP-Task: tsk_1\nEP-Agent: agt_1");
  });
});
