// Cancel and timeout end the whole process group: the adapter's child and the grandchild it
// started are both gone afterwards (checked by pid), and the result says why the run ended.
import { afterEach, describe, expect, it } from "vitest";
import {
  gone,
  grandchildPid,
  makeSpec,
  testConfig,
  waitFor,
  closeSpawners,
  SPAWN_PATHS,
  spawnVia,
} from "./fixtures/harness.js";
import { createRuntimeRegistry, type RuntimeRegistry } from "./registry.js";

let registry: RuntimeRegistry;
afterEach(async () => {
  await registry?.close();
  await closeSpawners();
});

describe.each(SPAWN_PATHS)("runs started %s", (path) => {
  describe("cancel", () => {
    it("kills a shell run's process group, grandchild included", async () => {
      registry = createRuntimeRegistry(testConfig(), spawnVia(path));
      const { spec, frames } = await makeSpec({ input: { command: "sleep 300 & echo grandchild $!; wait" } });
      const handle = registry.start("shell", spec);
      const grandchild = await waitFor(() => grandchildPid(frames));
      const leader = handle.pid!;
      expect(gone(leader)).toBe(false);
      expect(gone(grandchild)).toBe(false);

      const result = await handle.cancel("operator asked");
      expect(result).toMatchObject({ ok: false, cancelled: true, error: "cancelled: operator asked" });
      expect(gone(leader)).toBe(true);
      expect(gone(grandchild)).toBe(true);
      expect(registry.active()).toBe(0);
    });

    it("escalates to SIGKILL when the group ignores SIGTERM", async () => {
      registry = createRuntimeRegistry(testConfig(), spawnVia(path));
      const { spec, frames } = await makeSpec({
        input: { command: "trap '' TERM; (trap '' TERM; sleep 300) & echo grandchild $!; while :; do sleep 0.1; done" },
      });
      const handle = registry.start("shell", spec);
      const grandchild = await waitFor(() => grandchildPid(frames));
      const started = Date.now();
      const result = await handle.cancel();
      expect(Date.now() - started).toBeGreaterThanOrEqual(400); // the 0.5 s grace of testConfig()
      expect(result).toMatchObject({ cancelled: true, error: "cancelled" });
      expect(gone(handle.pid!)).toBe(true);
      expect(gone(grandchild)).toBe(true);
    });

    it.each(["vendorA_code", "vendorB", "vendorC"] as const)("kills a hung %s CLI and its grandchild", async (kind) => {
      registry = createRuntimeRegistry(testConfig(), spawnVia(path));
      const { spec, frames } = await makeSpec({ prompt: "[hang]" });
      const handle = registry.start(kind, spec);
      const grandchild = await waitFor(() => grandchildPid(frames));
      const result = await handle.cancel("task cancelled");
      expect(result).toMatchObject({ ok: false, cancelled: true });
      expect(gone(handle.pid!)).toBe(true);
      expect(gone(grandchild)).toBe(true);
    });

    it("cancel after the run ended changes nothing", async () => {
      registry = createRuntimeRegistry(testConfig(), spawnVia(path));
      const { spec } = await makeSpec({ input: { command: "echo ok" } });
      const handle = registry.start("shell", spec);
      const first = await handle.result;
      expect(await handle.cancel()).toEqual(first);
      expect(first.ok).toBe(true);
    });
  });

  describe("timeout", () => {
    it("ends the process group and says it timed out", async () => {
      registry = createRuntimeRegistry(testConfig(), spawnVia(path));
      // long enough for the fake CLI (node) to start and print its grandchild on a loaded machine
      const { spec, frames } = await makeSpec({ prompt: "[hang]", timeoutMs: 1500 });
      const handle = registry.start("vendorB", spec);
      const grandchild = await waitFor(() => grandchildPid(frames));
      const result = await handle.result;
      expect(result).toMatchObject({ ok: false, timedOut: true });
      expect(result.error).toContain("timed out after 1.5 s");
      expect(gone(handle.pid!)).toBe(true);
      expect(gone(grandchild)).toBe(true);
    });

    it("uses the runtime's configured timeout when the task gives none", async () => {
      const config = testConfig();
      config.shell.timeoutSeconds = 0.3;
      registry = createRuntimeRegistry(config, spawnVia(path));
      const { spec } = await makeSpec({ input: { command: "sleep 30" } });
      const result = await registry.start("shell", spec).result;
      expect(result).toMatchObject({ ok: false, timedOut: true });
    });
  });

  describe("orphans", () => {
    it("a background process left by a finished run is ended with it", async () => {
      registry = createRuntimeRegistry(testConfig(), spawnVia(path));
      const { spec, frames } = await makeSpec({ input: { command: "sleep 300 >/dev/null 2>&1 & echo grandchild $!" } });
      const result = await registry.start("shell", spec).result;
      expect(result.ok).toBe(true);
      expect(gone(grandchildPid(frames)!)).toBe(true);
    });
  });

  describe("registry close", () => {
    it("cancels every live run and refuses new ones", async () => {
      registry = createRuntimeRegistry(testConfig(), spawnVia(path));
      const a = await makeSpec({ input: { command: "sleep 300" } });
      const b = await makeSpec({ prompt: "[hang]" });
      const ha = registry.start("shell", a.spec);
      const hb = registry.start("vendorA_code", b.spec);
      await waitFor(() => grandchildPid(b.frames));
      expect(registry.active()).toBe(2);
      await registry.close();
      expect((await ha.result).cancelled).toBe(true);
      expect((await hb.result).cancelled).toBe(true);
      expect(gone(ha.pid!) && gone(hb.pid!)).toBe(true);
      expect(() => registry.start("shell", a.spec)).toThrow(/shutting down/);
    });

    it("an unknown runtime kind is refused naming the field", () => {
      registry = createRuntimeRegistry(testConfig(), spawnVia(path));
      expect(() => registry.get("vendorZ")).toThrow(/runtime: unknown runtime 'vendorZ'/);
    });
  });
});
