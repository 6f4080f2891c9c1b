// The planner booster: a WebAssembly module that sees every MCP tool call before it
// leaves the daemon and allows it, rejects it, or short-circuits it with success.
// The ABI is in docs/booster.md.
//
// The module runs in a worker thread so a runaway module can be stopped: the daemon
// thread hands the call over through shared memory and blocks on Atomics.wait for at
// most `timeoutMs`. A hand-off costs a few microseconds (no message queue, no event
// loop turn), which keeps the booster under the 0.2 ms-per-call budget
// (bench/booster.ts). On a timeout the worker is terminated and a fresh one is started;
// a trap re-instantiates the module. Either way the call gets an error verdict and the
// daemon carries on.
import { readFile } from "node:fs/promises";
import { performance } from "node:perf_hooks";
import { Worker } from "node:worker_threads";
import { EpError } from "../../common/errors.js";
import { silentLogger, type Logger } from "../../common/log.js";
import { DEFAULT_BOOSTER_WASM_BASE64 } from "./default-booster-bytes.js";

export type BoosterVerdict =
  | { verdict: "allow"; durationMs: number }
  | { verdict: "reject"; reason: string; durationMs: number }
  /** Answer the call with success without forwarding it; telemetry is still emitted by the caller. */
  | { verdict: "short_circuit"; reason: string; durationMs: number }
  /** The booster itself failed (trap, timeout, broken ABI, unserializable input). */
  | { verdict: "error"; error: EpError; durationMs: number };

export interface Booster {
  /** "embedded" for the built-in module, otherwise the path given with --booster-wasm. */
  readonly source: string;
  validate(tool: string, args: unknown): BoosterVerdict;
  close(): Promise<void>;
}

export interface BoosterOptions {
  /** Longest a single validate() may run before the module is stopped. Default 100 ms. */
  timeoutMs?: number;
  /** Longest a worker may take to start and instantiate the module. Default 5 s. */
  startTimeoutMs?: number;
  /** Largest serialized {tool, arguments} accepted. Default 2 MiB (the request limit is 1 MiB). */
  maxInputBytes?: number;
  log?: Logger;
}

/** Verdict codes returned by the module's validate(). */
export const VERDICT_ALLOW = 0;
export const VERDICT_REJECT = 1;
export const VERDICT_SHORT_CIRCUIT = 2;

/** Longest reason string the host reads from the module. */
export const MAX_REASON_BYTES = 4096;

// Control words shared with the worker (Int32Array indexes).
const STATE = 0; // IDLE | REQUEST | DONE | CLOSE
const INPUT_LEN = 1;
const STATUS = 2; // STATUS_*
const VERDICT = 3;
const OUT_LEN = 4; // bytes of reason or error text in the out buffer
const READY = 5; // 0 starting, 1 ready, 2 failed (out holds the error)

const IDLE = 0;
const REQUEST = 1;
const DONE = 2;
const CLOSE = 3;

// How long each side polls the shared state before sleeping on it (ms); waking a
// sleeping thread costs tens of microseconds, more on a busy machine. The caller is
// blocked either way, so it polls long enough to cover the worker's own wake-up plus a
// typical module run; the worker polls briefly after each call to catch bursts.
const CALLER_SPIN_MS = 0.3;
const WORKER_SPIN_MS = 0.05;

const STATUS_OK = 0;
const STATUS_TRAP = 1;
const STATUS_ABI = 2;

// Runs as CommonJS inside the worker (eval: true), so it works the same from the
// TypeScript sources and from the esbuild bundle without a separate file on disk.
const WORKER_SOURCE = `
"use strict";
const { workerData } = require("node:worker_threads");
const { module, ctl, input, out } = workerData;
const inputBytes = new Uint8Array(input);
const outBytes = new Uint8Array(out);
const encoder = new TextEncoder();
let ex;

function instantiate() { ex = new WebAssembly.Instance(module, {}).exports; }

function writeOut(text) { ctl[${OUT_LEN}] = encoder.encodeInto(String(text), outBytes).written; }

class AbiError extends Error {}

function readReason() {
  ctl[${OUT_LEN}] = 0;
  if (typeof ex.reason_ptr !== "function" || typeof ex.reason_len !== "function") return;
  const ptr = ex.reason_ptr() >>> 0;
  const len = Math.min(ex.reason_len() >>> 0, outBytes.length);
  const mem = new Uint8Array(ex.memory.buffer);
  if (ptr + len > mem.length) throw new AbiError("reason_ptr()/reason_len() point outside the module's memory");
  outBytes.set(mem.subarray(ptr, ptr + len));
  ctl[${OUT_LEN}] = len;
}

function handle() {
  const len = ctl[${INPUT_LEN}];
  try {
    const ptr = ex.alloc(len) >>> 0;
    const mem = ex.memory.buffer;
    if ((ptr === 0 && len > 0) || ptr + len > mem.byteLength) {
      throw new AbiError("alloc(" + len + ") returned " + ptr + ", which does not fit in the module's memory");
    }
    new Uint8Array(mem, ptr, len).set(inputBytes.subarray(0, len));
    const verdict = ex.validate(ptr, len);
    if (typeof verdict !== "number") throw new AbiError("validate(ptr, len) must return an i32");
    readReason();
    ctl[${VERDICT}] = verdict;
    ctl[${STATUS}] = ${STATUS_OK};
  } catch (err) {
    ctl[${STATUS}] = err instanceof WebAssembly.RuntimeError ? ${STATUS_TRAP} : ${STATUS_ABI};
    writeOut(err && err.message ? err.message : err);
    // A trap can leave the module's globals and memory half-updated: start it afresh.
    try { instantiate(); } catch {}
  }
}

function main() {
  try {
    instantiate();
  } catch (err) {
    writeOut(err && err.message ? err.message : err);
    Atomics.store(ctl, ${READY}, 2);
    Atomics.notify(ctl, ${READY});
    return;
  }
  Atomics.store(ctl, ${READY}, 1);
  Atomics.notify(ctl, ${READY});
  for (;;) {
    let s;
    // Calls often come in bursts: poll briefly before sleeping, since waking a sleeping
    // thread costs tens of microseconds.
    const spinUntil = performance.now() + ${WORKER_SPIN_MS};
    while ((s = Atomics.load(ctl, ${STATE})) !== ${REQUEST} && s !== ${CLOSE} && performance.now() < spinUntil);
    while ((s = Atomics.load(ctl, ${STATE})) !== ${REQUEST} && s !== ${CLOSE}) Atomics.wait(ctl, ${STATE}, s);
    if (s === ${CLOSE}) return;
    handle();
    Atomics.store(ctl, ${STATE}, ${DONE});
    Atomics.notify(ctl, ${STATE});
  }
}
main();
`;

interface WorkerHandle {
  worker: Worker;
  ctl: Int32Array;
  input: Uint8Array;
  out: Uint8Array;
  ready: boolean;
}

const decoder = new TextDecoder();
const encoder = new TextEncoder();

function loadError(path: string, message: string): EpError {
  return new EpError("config_invalid", `--booster-wasm ${path}: ${message}`, { field: "--booster-wasm", path });
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Checks the exports and imports the ABI requires; returns the problem or undefined. */
function abiProblem(module: WebAssembly.Module): string | undefined {
  const imports = WebAssembly.Module.imports(module);
  if (imports.length > 0) {
    return (
      `a booster may not import anything, but it imports ` + `${imports.map((i) => `${i.module}.${i.name}`).join(", ")}`
    );
  }
  const exports = new Map(WebAssembly.Module.exports(module).map((e) => [e.name, e.kind]));
  const missing: string[] = [];
  if (exports.get("memory") !== "memory") missing.push("memory (memory)");
  if (exports.get("alloc") !== "function") missing.push("alloc(len) -> ptr (function)");
  if (exports.get("validate") !== "function") missing.push("validate(ptr, len) -> verdict (function)");
  const hasPtr = exports.get("reason_ptr") === "function";
  const hasLen = exports.get("reason_len") === "function";
  if (hasPtr !== hasLen)
    missing.push(
      hasPtr
        ? "reason_len() (function, exported with reason_ptr)"
        : "reason_ptr() (function, exported with reason_len)",
    );
  return missing.length > 0 ? `the module does not export ${missing.join(", ")}` : undefined;
}

/**
 * Loads the booster given with --booster-wasm, or the embedded default when `path` is
 * undefined. A file that cannot be read, is not WebAssembly, breaks the ABI or fails to
 * instantiate is a `config_invalid` EpError naming the flag and the path (a startup error).
 */
export async function loadBooster(path: string | undefined, opts: BoosterOptions = {}): Promise<Booster> {
  if (path === undefined)
    return loadBoosterFromBytes(Buffer.from(DEFAULT_BOOSTER_WASM_BASE64, "base64"), "embedded", opts);
  let bytes: Uint8Array;
  try {
    bytes = await readFile(path);
  } catch (err) {
    throw loadError(path, `cannot read the file (${errorMessage(err)})`);
  }
  return loadBoosterFromBytes(bytes, path, opts);
}

/** Like loadBooster, for module bytes already in memory; `source` names them in errors and telemetry. */
export async function loadBoosterFromBytes(
  bytes: Uint8Array,
  source: string,
  opts: BoosterOptions = {},
): Promise<Booster> {
  let module: WebAssembly.Module;
  try {
    module = await WebAssembly.compile(new Uint8Array(bytes));
  } catch (err) {
    throw loadError(source, `not a valid WebAssembly module (${errorMessage(err)})`);
  }
  const problem = abiProblem(module);
  if (problem) throw loadError(source, problem);
  const booster = createBoosterRunner(module, source, opts);
  const startError = booster.start();
  if (startError) {
    await booster.close();
    throw loadError(source, startError);
  }
  return booster;
}

function createBoosterRunner(
  module: WebAssembly.Module,
  source: string,
  opts: BoosterOptions,
): Booster & { start(): string | undefined } {
  const timeoutMs = opts.timeoutMs ?? 100;
  const startTimeoutMs = opts.startTimeoutMs ?? 5000;
  const maxInputBytes = opts.maxInputBytes ?? 2 * 1024 * 1024;
  const log = (opts.log ?? silentLogger).child({ booster: source });
  let current: WorkerHandle | undefined;
  let closed = false;
  const dying = new Set<Promise<number>>();

  function spawn(): WorkerHandle {
    const ctl = new Int32Array(new SharedArrayBuffer(8 * Int32Array.BYTES_PER_ELEMENT));
    const inputSab = new SharedArrayBuffer(maxInputBytes);
    const outSab = new SharedArrayBuffer(MAX_REASON_BYTES);
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { module, ctl, input: inputSab, out: outSab },
      resourceLimits: { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 16 },
    });
    // Never let the booster's thread keep the daemon alive or crash it.
    worker.unref();
    const handle: WorkerHandle = {
      worker,
      ctl,
      input: new Uint8Array(inputSab),
      out: new Uint8Array(outSab),
      ready: false,
    };
    worker.on("error", (err) => log.error("booster worker failed", { error: errorMessage(err) }));
    // A worker that died on its own (e.g. out of heap) is replaced on the next call.
    worker.on("exit", () => {
      if (current === handle) current = undefined;
    });
    return handle;
  }

  function kill(handle: WorkerHandle): void {
    if (current === handle) current = undefined;
    const done = handle.worker.terminate().catch(() => -1);
    dying.add(done);
    void done.then(() => dying.delete(done));
  }

  /** Returns a started worker, or the reason none could be started. */
  function ensureWorker(): WorkerHandle | string {
    const handle = current ?? (current = spawn());
    if (handle.ready) return handle;
    if (Atomics.wait(handle.ctl, READY, 0, startTimeoutMs) === "timed-out") {
      kill(handle);
      return `the module did not start within ${startTimeoutMs} ms`;
    }
    if (Atomics.load(handle.ctl, READY) === 2) {
      const message = readOut(handle);
      kill(handle);
      return `the module failed to instantiate (${message})`;
    }
    handle.ready = true;
    return handle;
  }

  const failed = (t0: number, message: string, details: Record<string, unknown>, code?: FailCode) =>
    failure(source, t0, message, details, code);

  function validate(tool: string, args: unknown): BoosterVerdict {
    const t0 = performance.now();
    if (closed) return failed(t0, "The booster is closed.", { cause: "closed" });
    let json: string;
    try {
      json = JSON.stringify({ tool, arguments: args ?? null });
    } catch (err) {
      return failed(
        t0,
        `arguments: cannot be serialized as JSON (${errorMessage(err)})`,
        { field: "arguments" },
        "invalid_argument",
      );
    }
    const handle = ensureWorker();
    if (typeof handle === "string") {
      return failed(t0, `Booster ${source} is unavailable: ${handle}.`, { cause: "start" });
    }
    const { ctl } = handle;
    const { read, written } = encoder.encodeInto(json, handle.input);
    if (read < json.length) {
      return failed(
        t0,
        `arguments: the call is larger than the booster's ${maxInputBytes}-byte input limit`,
        { field: "arguments" },
        "payload_too_large",
      );
    }
    ctl[INPUT_LEN] = written;
    Atomics.store(ctl, STATE, REQUEST);
    Atomics.notify(ctl, STATE, 1);
    const spinUntil = performance.now() + CALLER_SPIN_MS;
    while (Atomics.load(ctl, STATE) !== DONE && performance.now() < spinUntil);
    const deadline = performance.now() + timeoutMs;
    while (Atomics.load(ctl, STATE) !== DONE) {
      const left = deadline - performance.now();
      if (left <= 0) {
        kill(handle);
        log.warn("booster timed out; restarting it", { tool, timeout_ms: timeoutMs });
        // Start the replacement now so it is ready by the next call.
        if (!closed) current = spawn();
        return failed(
          t0,
          `Booster ${source} did not answer within ${timeoutMs} ms for tool ${tool}; it was stopped and restarted.`,
          {
            cause: "timeout",
            tool,
            timeout_ms: timeoutMs,
          },
        );
      }
      Atomics.wait(ctl, STATE, REQUEST, left);
    }
    Atomics.store(ctl, STATE, IDLE);
    return verdictOf(handle, source, tool, t0);
  }

  return {
    source,
    validate,
    start() {
      const handle = ensureWorker();
      return typeof handle === "string" ? handle : undefined;
    },
    async close() {
      if (closed) return;
      closed = true;
      const handle = current;
      if (handle) {
        Atomics.store(handle.ctl, STATE, CLOSE);
        Atomics.notify(handle.ctl, STATE);
        kill(handle);
      }
      await Promise.all([...dying]);
    },
  };
}

function readOut(handle: WorkerHandle): string {
  return decoder.decode(handle.out.subarray(0, handle.ctl[OUT_LEN]));
}

type FailCode = "internal" | "invalid_argument" | "payload_too_large";

function failure(
  source: string,
  t0: number,
  message: string,
  details: Record<string, unknown>,
  code: FailCode = "internal",
): BoosterVerdict {
  return {
    verdict: "error",
    error: new EpError(code, message, { booster: source, ...details }),
    durationMs: performance.now() - t0,
  };
}

/** The verdict a finished call left in the control block (or why the module failed). */
function verdictOf(handle: WorkerHandle, source: string, tool: string, t0: number): BoosterVerdict {
  const { ctl } = handle;
  const status = ctl[STATUS];
  if (status === STATUS_TRAP) {
    return failure(source, t0, `Booster ${source} trapped on tool ${tool}: ${readOut(handle)}.`, {
      cause: "trap",
      tool,
    });
  }
  if (status === STATUS_ABI) {
    return failure(source, t0, `Booster ${source} broke the ABI on tool ${tool}: ${readOut(handle)}.`, {
      cause: "abi",
      tool,
    });
  }
  const code = ctl[VERDICT];
  const durationMs = performance.now() - t0;
  switch (code) {
    case VERDICT_ALLOW:
      return { verdict: "allow", durationMs };
    case VERDICT_REJECT:
      return { verdict: "reject", reason: readOut(handle) || "rejected by the planner booster", durationMs };
    case VERDICT_SHORT_CIRCUIT:
      return { verdict: "short_circuit", reason: readOut(handle), durationMs };
    default:
      return failure(
        source,
        t0,
        `Booster ${source} returned unknown verdict ${code} for tool ${tool} (expected 0, 1 or 2).`,
        {
          cause: "abi",
          tool,
          verdict_code: code,
        },
      );
  }
}

/**
 * The error a caller returns for a verdict that stops the call: a rejection is the
 * caller's fault (`invalid_argument` with the module's reason), a booster failure is ours.
 */
export function verdictError(verdict: BoosterVerdict, tool: string, source: string): EpError | undefined {
  if (verdict.verdict === "reject") {
    return new EpError("invalid_argument", `The planner booster rejected ${tool}: ${verdict.reason}`, {
      field: "arguments",
      tool,
      booster: source,
      reason: verdict.reason,
    });
  }
  if (verdict.verdict === "error") return verdict.error;
  return undefined;
}
