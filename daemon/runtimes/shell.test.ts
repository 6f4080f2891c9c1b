import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { makeSpec, testConfig, closeSpawners, SPAWN_PATHS, spawnVia } from "./fixtures/harness.js";
import { createRuntimeRegistry, type RuntimeRegistry } from "./registry.js";

let registry: RuntimeRegistry;
afterEach(async () => {
  await registry?.close();
  await closeSpawners();
});

describe.each(SPAWN_PATHS)("runs started %s", (path) => {
  describe("shell runtime", () => {
    it("runs input.command with bash -c in the run's cwd and env, one text frame per line", async () => {
      registry = createRuntimeRegistry(testConfig(), spawnVia(path));
      const { spec, frames } = await makeSpec({
        input: { command: 'echo "hello $EP_SECRETS_SESSION"; pwd; echo made > out.txt; test -t 0 || echo "no tty"' },
      });
      const result = await registry.start("shell", spec).result;
      expect(result).toMatchObject({ ok: true, exitCode: 0 });
      expect(result.output).toBe(`hello ses_test_1\n${spec.cwd}\nno tty\n`);
      expect(frames.map((f) => f.text)).toEqual(["hello ses_test_1", spec.cwd, "no tty"]);
      expect(await readFile(join(spec.cwd, "out.txt"), "utf8")).toBe("made\n");
    });

    it("a non-zero exit fails with the code and the end of stderr", async () => {
      registry = createRuntimeRegistry(testConfig(), spawnVia(path));
      const { spec, frames } = await makeSpec({ input: { command: "echo partial; echo 'disk full' >&2; exit 7" } });
      const result = await registry.start("shell", spec).result;
      expect(result).toMatchObject({
        ok: false,
        exitCode: 7,
        output: "partial\n",
        error: "shell exited with code 7: disk full",
      });
      expect(frames).toContainEqual({ kind: "stderr", text: "disk full" });
    });

    it("the child gets exactly the run's environment", async () => {
      registry = createRuntimeRegistry(testConfig(), spawnVia(path));
      const { spec } = await makeSpec({
        input: { command: "echo ${EP_TOKEN:-unset}" },
        env: { PATH: "/usr/bin:/bin" },
      });
      process.env.EP_TOKEN = "must-not-leak";
      try {
        const result = await registry.start("shell", spec).result;
        expect(result.output).toBe("unset\n");
      } finally {
        delete process.env.EP_TOKEN;
      }
    });

    it.each([
      [{}, "input.command: is required"],
      [{ command: 42 }, "input.command: must be a non-empty string"],
      [{ command: "" }, "input.command: must be a non-empty string"],
    ])("input %j is refused naming the field", async (input, message) => {
      registry = createRuntimeRegistry(testConfig(), spawnVia(path));
      const { spec } = await makeSpec({ input });
      const result = await registry.start("shell", spec).result;
      expect(result).toMatchObject({
        ok: false,
        errorCode: "invalid_argument",
        error: expect.stringContaining(message),
      });
    });

    it("output is kept whole when the process leaves nothing behind", async () => {
      registry = createRuntimeRegistry(testConfig(), spawnVia(path));
      const { spec, frames } = await makeSpec({ input: { command: "seq 1 2000" } });
      const result = await registry.start("shell", spec).result;
      expect(result.ok).toBe(true);
      expect(frames).toHaveLength(2000);
      expect(result.output.split("\n").at(-2)).toBe("2000");
    });
  });

  describe("run directory", () => {
    it.each(["vendorA_code", "vendorA_agent_acp", "muxhost_hosted", "shell"] as const)(
      "%s refuses a cwd that does not exist, naming the field",
      async (kind) => {
        const registry = createRuntimeRegistry(testConfig(), spawnVia(path));
        const { spec } = await makeSpec({ cwd: "/nonexistent/ep-run", input: { command: "true" } });
        const result = await registry.start(kind, spec).result;
        expect(result).toMatchObject({
          ok: false,
          errorCode: "invalid_argument",
          error: expect.stringContaining("cwd: '/nonexistent/ep-run'"),
        });
        await registry.close();
      },
    );
  });
});
