import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { EpError } from "../../common/errors.js";
import { loadBooster, loadBoosterFromBytes, verdictError, type Booster } from "./booster.js";
import { compileWat } from "../../test-support/wat-compiler.js";

// A booster whose validate body is `body` (locals: $ptr, $len), with a bump-free alloc at 1024
// and a reason string at 16.
function boosterWat(body: string, reason = ""): string {
  return `(module
  (memory (export "memory") 1)
  (data (i32.const 16) "${reason}")
  (func (export "alloc") (param $len i32) (result i32) (i32.const 1024))
  (func (export "reason_ptr") (result i32) (i32.const 16))
  (func (export "reason_len") (result i32) (i32.const ${Buffer.byteLength(reason)}))
  (func (export "validate") (param $ptr i32) (param $len i32) (result i32) ${body}))`;
}

let dir: string;
const open: Booster[] = [];

async function boosterFile(name: string, wat: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, await compileWat(wat));
  return path;
}

async function load(wat: string, opts = {}): Promise<Booster> {
  const booster = await loadBooster(await boosterFile(`b${open.length}.wasm`, wat), opts);
  open.push(booster);
  return booster;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "ep-booster-"));
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((b) => b.close()));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("planner booster", () => {
  it("allows a call when validate returns 0", async () => {
    const booster = await load(boosterWat("(i32.const 0)"));
    const v = booster.validate("create_mission", { title: "x" });
    expect(v.verdict).toBe("allow");
    expect(verdictError(v, "create_mission", booster.source)).toBeUndefined();
  });

  it("rejects with the module's reason when validate returns 1", async () => {
    const booster = await load(boosterWat("(i32.const 1)", "missions are frozen today"));
    const v = booster.validate("create_mission", { title: "x" });
    expect(v).toMatchObject({ verdict: "reject", reason: "missions are frozen today" });
    const err = verdictError(v, "create_mission", booster.source);
    expect(err).toBeInstanceOf(EpError);
    expect(err?.code).toBe("invalid_argument");
    expect(err?.message).toContain("missions are frozen today");
  });

  it("short-circuits when validate returns 2", async () => {
    const booster = await load(boosterWat("(i32.const 2)", "cached"));
    const v = booster.validate("list_tasks", { domain_id: "dom_1" });
    expect(v).toMatchObject({ verdict: "short_circuit", reason: "cached" });
    expect(verdictError(v, "list_tasks", booster.source)).toBeUndefined();
  });

  it("sees the call as UTF-8 JSON {tool, arguments} in its memory", async () => {
    // Reject unless the first byte is '{' and the input length matches what the host wrote.
    const input = JSON.stringify({ tool: "put_doc", arguments: { body: "héllo" } });
    const booster = await load(
      boosterWat(
        `(if (result i32) (i32.and (i32.eq (i32.load8_u (local.get $ptr)) (i32.const 123))
                                   (i32.eq (local.get $len) (i32.const ${Buffer.byteLength(input)})))
           (then (i32.const 0)) (else (i32.const 1)))`,
      ),
    );
    expect(booster.validate("put_doc", { body: "héllo" }).verdict).toBe("allow");
    expect(booster.validate("put_doc", { body: "hello" }).verdict).toBe("reject");
  });

  it("turns a trap into an error verdict and keeps working", async () => {
    // Traps when the arguments say so (second-to-last byte is '1' in {"trap":1}), else allows.
    const booster = await load(
      boosterWat(`(if (i32.eq (i32.load8_u (i32.sub (i32.add (local.get $ptr) (local.get $len))
                    (i32.const 3))) (i32.const 49))
                    (then unreachable)) (i32.const 0)`),
    );
    const v = booster.validate("create_domain", { trap: 1 });
    expect(v.verdict).toBe("error");
    if (v.verdict !== "error") return;
    expect(v.error.code).toBe("internal");
    expect(v.error.details).toMatchObject({ cause: "trap", tool: "create_domain" });
    expect(v.error.message).toMatch(/trapped.*unreachable/);
    expect(booster.validate("create_domain", { trap: 0 }).verdict).toBe("allow");
  });

  it("bounds an infinite loop, restarts the module, and answers the next call", async () => {
    // Loops forever when the arguments are {"loop":1}, else allows.
    const booster = await load(
      boosterWat(`(if (i32.eq (i32.load8_u (i32.sub (i32.add (local.get $ptr) (local.get $len))
                    (i32.const 3))) (i32.const 49))
                    (then (loop $forever (br $forever)))) (i32.const 0)`),
      { timeoutMs: 100 },
    );
    const started = performance.now();
    const v = booster.validate("submit_mesh_task", { loop: 1 });
    const took = performance.now() - started;
    expect(v.verdict).toBe("error");
    if (v.verdict !== "error") return;
    expect(v.error.details).toMatchObject({ cause: "timeout", timeout_ms: 100 });
    expect(v.error.message).toContain("did not answer within 100 ms");
    expect(took).toBeGreaterThanOrEqual(99);
    expect(took).toBeLessThan(2000);
    // The process is alive and the next call goes to a fresh module.
    expect(booster.validate("submit_mesh_task", { loop: 0 }).verdict).toBe("allow");
    expect(booster.validate("submit_mesh_task", { loop: 1 }).verdict).toBe("error");
    expect(booster.validate("submit_mesh_task", { loop: 0 }).verdict).toBe("allow");
  });

  it("reports an out-of-range verdict as a broken ABI", async () => {
    const booster = await load(boosterWat("(i32.const 7)"));
    const v = booster.validate("create_domain", { name: "a" });
    expect(v.verdict).toBe("error");
    if (v.verdict === "error") expect(v.error.details).toMatchObject({ cause: "abi", verdict_code: 7 });
  });

  it("reports an alloc that points outside memory as a broken ABI", async () => {
    const wat = boosterWat("(i32.const 0)").replace(
      "(result i32) (i32.const 1024))",
      "(result i32) (i32.const 70000))",
    );
    const booster = await load(wat);
    const v = booster.validate("create_domain", { name: "a" });
    expect(v.verdict).toBe("error");
    if (v.verdict === "error") expect(v.error.message).toMatch(/alloc\(\d+\) returned 70000/);
  });

  it("refuses arguments that cannot be serialized, naming the field", async () => {
    const booster = await load(boosterWat("(i32.const 0)"));
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const v = booster.validate("put_doc", cyclic);
    expect(v.verdict).toBe("error");
    if (v.verdict === "error") {
      expect(v.error.code).toBe("invalid_argument");
      expect(v.error.details).toMatchObject({ field: "arguments" });
    }
  });

  it("answers with an error verdict after close", async () => {
    const booster = await load(boosterWat("(i32.const 0)"));
    await booster.close();
    expect(booster.validate("x", { a: 1 }).verdict).toBe("error");
  });
});

describe("loading a booster", () => {
  async function loadFails(path: string): Promise<EpError> {
    const err = await loadBooster(path).then(
      (b) => {
        open.push(b);
        throw new Error("loaded");
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(EpError);
    return err as EpError;
  }

  it("fails clearly when the file is missing", async () => {
    const err = await loadFails(join(dir, "nope.wasm"));
    expect(err.code).toBe("config_invalid");
    expect(err.message).toMatch(/--booster-wasm .*nope\.wasm: cannot read the file/);
    expect(err.details).toMatchObject({ field: "--booster-wasm" });
  });

  it("fails clearly when the file is not WebAssembly", async () => {
    const path = join(dir, "text.wasm");
    await writeFile(path, "hello");
    expect((await loadFails(path)).message).toContain("not a valid WebAssembly module");
  });

  it("fails clearly when validate or memory is missing", async () => {
    const path = await boosterFile(
      "noexports.wasm",
      `(module (func (export "alloc") (param i32) (result i32) (i32.const 0)))`,
    );
    const err = await loadFails(path);
    expect(err.message).toContain("memory (memory)");
    expect(err.message).toContain("validate(ptr, len)");
  });

  it("fails clearly when the module imports something", async () => {
    const path = await boosterFile(
      "imports.wasm",
      `(module (import "env" "log" (func (param i32))) (memory (export "memory") 1))`,
    );
    expect((await loadFails(path)).message).toContain("may not import anything, but it imports env.log");
  });

  it("fails clearly when the module traps while starting", async () => {
    const path = await boosterFile(
      "startTrap.wasm",
      boosterWat("(i32.const 0)").replace(/\)$/, ` (func $boom unreachable) (start $boom))`),
    );
    expect((await loadFails(path)).message).toContain("failed to instantiate");
  });

  it("loads from bytes too", async () => {
    const booster = await loadBoosterFromBytes(await compileWat(boosterWat("(i32.const 0)")), "inline");
    open.push(booster);
    expect(booster.source).toBe("inline");
    expect(booster.validate("a", { b: 1 }).verdict).toBe("allow");
  });
});
