import { describe, expect, it } from "vitest";
import { parseAgentsFile } from "./agents-file.js";

describe("agents.toml", () => {
  it("parses profiles with defaults", () => {
    const r = parseAgentsFile(`[[agent]]
id = "pm"
runtime = "muxhost_hosted"
cwd = "/srv/pm"
command = ["claude", "--resume"]
supervise = true
capabilities = ["plan"]
[agent.env]
FOO = "bar"

[[agent]]
id = "oneshot"
runtime = "vendorB"
`);
    expect(r).toEqual({
      ok: true,
      profiles: [
        {
          id: "pm",
          name: "pm",
          runtime: "muxhost_hosted",
          session: "pm",
          cwd: "/srv/pm",
          env: { FOO: "bar" },
          capabilities: ["plan"],
          command: ["claude", "--resume"],
          supervise: true,
          line: 1,
        },
        {
          id: "oneshot",
          name: "oneshot",
          runtime: "vendorB",
          session: "oneshot",
          env: {},
          capabilities: [],
          supervise: false,
          line: 11,
        },
      ],
    });
  });

  it("reports every error with its line", () => {
    const r = parseAgentsFile(`[[agent]]
id = "a"
runtime = "nope"

[[agent]]
runtime = "shell"
supervise = "yes"

[[agent]]
id = "a"
runtime = "shell"
supervise = true
cwd = "relative"
colour = "red"
session = "x.y"
`);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors.map((e) => [e.line, e.agent, e.field])).toEqual([
      [3, "a", "runtime"],
      [5, "#2", "id"],
      [7, "#2", "supervise"],
      [9, "a", "command"],
      [10, "a", "id"],
      [13, "a", "cwd"],
      [14, "a", "colour"],
      [15, "a", "session"],
    ]);
  });

  it("takes a workspace for a profile's tasks, and refuses an empty one", () => {
    const ok = parseAgentsFile(`[[agent]]\nid = "a"\nruntime = "shell"\nworkspace = " web "\n`);
    expect(ok.ok && ok.profiles[0].workspace).toBe("web");
    const bad = parseAgentsFile(`[[agent]]\nid = "a"\nruntime = "shell"\nworkspace = ""\n`);
    expect(bad.ok ? [] : bad.errors.map((e) => [e.line, e.field])).toEqual([[4, "workspace"]]);
  });

  it("takes a profile's own permission for its runtime, and refuses one that does not apply", () => {
    const ok = parseAgentsFile(
      `[[agent]]\nid = "a"\nruntime = "vendorA_agent_acp"\npermission = "ask"\n[[agent]]\nid = "b"\nruntime = ` +
        `"vendorA_code"\npermission = "ask"\n[[agent]]\nid = "c"\nruntime = "shell"\npermission = "workspace"\n`,
    );
    expect(ok.ok && ok.profiles.map((p) => p.permission)).toEqual(["ask", "ask", "workspace"]);
    const bad = parseAgentsFile(
      `[[agent]]\nid = "a"\nruntime = "vendorA_code"\npermission = ` +
        `"allow_once"\n[[agent]]\nid = "b"\nruntime = "shell"\npermission = "ask"\n`,
    );
    expect(bad.ok ? [] : bad.errors.map((e) => [e.line, e.field, e.message])).toEqual([
      [
        4,
        "permission",
        `permission "allow_once": 'allow_once' was renamed: use ` +
          `"workspace" (must be one of workspace, ask, read-only, unconfined)`,
      ],
      [
        8,
        "permission",
        'permission "ask": "ask" works for vendorA_code and vendorA_agent_acp ' +
          "(their CLIs ask EP); shell has no way to ask a person",
      ],
    ]);
  });

  it("gives the line of a TOML syntax error", () => {
    const r = parseAgentsFile(`[[agent]]\nid = "a"\nruntime = \n`);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors[0].line).toBe(3);
  });
});
