// muxhost_hosted against the real tmux, on a private server (`tmux -L <unique>`) so the user's
// own sessions are never touched. Skipped with a reason when tmux is absent outside CI.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { gone, grandchildPid, makeSpec, testConfig, waitFor } from "./fixtures/harness.js";
import { optionalTool } from "../../tests/optional-tools.js";
import { waitFor as waitUntil } from "../../test-support/wait.js";
import { taskSessionName } from "./muxhost-hosted.js";
import { createRuntimeRegistry, type RuntimeRegistry } from "./registry.js";
import {
  runTmux,
  stripAnsi,
  tmuxCapturePane,
  tmuxKillSession,
  tmuxNewSession,
  tmuxSendKeys,
  tmuxSessionExists,
} from "./tmux.js";

const tmuxTool = optionalTool("tmux", { pkg: "tmux", suite: "muxhost_hosted" });
// One private server per describe: an afterAll's kill-server returns before that server has
// exited, so a next describe on the same socket would connect to a dying server.
const socketBase = `ep-test-${process.pid}-${Date.now().toString(36)}`;
const socketName = `${socketBase}-rt`;
const tmux = { socketName };

function registryWithSocket(): RuntimeRegistry {
  const config = testConfig();
  config.muxhost_hosted = {
    ...config.muxhost_hosted,
    command: "bash",
    taskArgs: ["-c", "{command}"],
    socketName,
    pollIntervalMs: 50,
  };
  return createRuntimeRegistry(config);
}

describe.skipIf(tmuxTool.skip)("muxhost_hosted", () => {
  beforeAll(() => void tmuxTool.require());
  afterAll(async () => {
    await runTmux(["kill-server"], tmux);
  });

  it("runs the task in a detached tmux session and ends with the pane's exit", async () => {
    const registry = registryWithSocket();
    const { spec, frames } = await makeSpec({
      input: {
        command: 'printf "\\033[1mbold\\033[0m line\\n"; echo "session=$EP_SECRETS_SESSION"; pwd; sleep 0.3; exit 0',
      },
    });
    const handle = registry.start("muxhost_hosted", spec);
    const session = taskSessionName(spec.taskId);
    await waitFor(() => frames.some((f) => f.kind === "status"));
    expect(frames[0]).toMatchObject({ kind: "status", data: { session, socket: socketName } });
    expect(await tmuxSessionExists(session, tmux)).toBe(true);
    const result = await handle.result;
    expect(result).toMatchObject({ ok: true, exitCode: 0 });
    expect(result.output).toBe(`bold line\nsession=ses_test_1\n${spec.cwd}`);
    expect(frames.filter((f) => f.kind === "text").map((f) => f.text)).toEqual([
      "bold line",
      "session=ses_test_1",
      spec.cwd,
    ]);
    expect(await tmuxSessionExists(session, tmux)).toBe(false);
    await registry.close();
  });

  it(
    'with permission = "workspace" the process in the pane ' + "is confined: its cwd writable, the rest read-only",
    async () => {
      const registry = registryWithSocket();
      const outside = mkdtempSync(join(homedir(), ".ep-pane-outside-"));
      try {
        const { spec } = await makeSpec({
          permission: "workspace",
          input: { command: `echo in > in.txt && cat in.txt; echo out > ${outside}/out.txt || echo outside-refused` },
        });
        const result = await registry.start("muxhost_hosted", spec).result;
        expect(result.ok, result.error).toBe(true);
        expect(result.output).toContain("in");
        expect(result.output).toContain("Read-only file system");
        expect(result.output).toContain("outside-refused");
        expect(existsSync(join(outside, "out.txt"))).toBe(false);
      } finally {
        rmSync(outside, { recursive: true, force: true });
        await registry.close();
      }
    },
  );

  it("a non-zero exit fails the run with the pane's status", async () => {
    const registry = registryWithSocket();
    const { spec } = await makeSpec({ input: { command: "echo failing; exit 3" } });
    const result = await registry.start("muxhost_hosted", spec).result;
    expect(result).toMatchObject({
      ok: false,
      exitCode: 3,
      output: "failing",
      error: "runtime muxhost_hosted: 'bash' exited with code 3",
    });
    await registry.close();
  });

  it("cancel kills the pane's process group and removes the session", async () => {
    const registry = registryWithSocket();
    const { spec, frames } = await makeSpec({ input: { command: "sleep 300 & echo grandchild $!; wait" } });
    const handle = registry.start("muxhost_hosted", spec);
    const grandchild = await waitFor(() => grandchildPid(frames));
    const leader = handle.pid!;
    expect(gone(leader)).toBe(false);
    const result = await handle.cancel("operator asked");
    expect(result).toMatchObject({ ok: false, cancelled: true, error: "cancelled: operator asked" });
    expect(gone(leader)).toBe(true);
    expect(gone(grandchild)).toBe(true);
    expect(await tmuxSessionExists(taskSessionName(spec.taskId), tmux)).toBe(false);
    await registry.close();
  });

  it("times out like the other runtimes", async () => {
    const registry = registryWithSocket();
    const { spec } = await makeSpec({ input: { command: "sleep 300" }, timeoutMs: 300 });
    const result = await registry.start("muxhost_hosted", spec).result;
    expect(result).toMatchObject({ ok: false, timedOut: true });
    await registry.close();
  });
});

describe.skipIf(tmuxTool.skip)("tmux helpers", () => {
  beforeAll(() => void tmuxTool.require());
  const tmux = { socketName: `${socketBase}-helpers` };
  afterAll(async () => {
    await runTmux(["kill-server"], tmux);
  });

  it("tmuxNewSession starts a fresh server when the old one is still exiting after kill-server", async () => {
    const { spec } = await makeSpec();
    const race = { socketName: `${socketBase}-race` };
    try {
      for (let i = 0; i < 20; i++) {
        await tmuxNewSession({
          ...race,
          session: `race${i}`,
          executable: "/bin/cat",
          args: [],
          cwd: spec.cwd,
          env: { PATH: "/usr/bin:/bin" },
        });
        expect(await tmuxSessionExists(`race${i}`, race)).toBe(true);
        await runTmux(["kill-server"], race); // returns before the server has exited
      }
    } finally {
      await runTmux(["kill-server"], race);
    }
  });

  it("tmuxSendKeys types into a hosted session and tmuxSessionExists matches names exactly", async () => {
    const { spec } = await makeSpec();
    await tmuxNewSession({
      ...tmux,
      session: "ep-agent-dev",
      executable: "/bin/cat",
      args: [],
      cwd: spec.cwd,
      env: { PATH: "/usr/bin:/bin" },
    });
    expect(await tmuxSessionExists("ep-agent-dev", tmux)).toBe(true);
    expect(await tmuxSessionExists("ep-agent", tmux)).toBe(false); // no prefix match
    await tmuxSendKeys("ep-agent-dev", "hello from a signal; $HOME stays literal", tmux);
    let text = "";
    await waitUntil(async () => {
      text = stripAnsi(await tmuxCapturePane("ep-agent-dev", tmux));
      return /hello from a signal; \$HOME stays literal\n.*hello from a signal/s.test(text);
    }, 2000).catch(() => undefined); // the count below says what the pane shows
    // cat echoes the line once as typed (tty echo) and once as its output.
    expect(text.match(/hello from a signal; \$HOME stays literal/g)).toHaveLength(2);
    await tmuxKillSession("ep-agent-dev", tmux);
    expect(await tmuxSessionExists("ep-agent-dev", tmux)).toBe(false);
  });

  it("tmuxSendKeys to a missing session is a not_found error", async () => {
    await expect(tmuxSendKeys("ep-nobody", "hi", tmux)).rejects.toMatchObject({ code: "not_found" });
  });

  it("stripAnsi leaves plain text", () => {
    expect(stripAnsi("\x1b]0;title\x07\x1b[31mred\x1b[0m\r")).toBe("red");
  });
});
