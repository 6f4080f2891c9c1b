// Runs the built `ep` (bin/ep.js → dist/cli/main.js) as a subprocess; `npm run build` must have run.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./harness.js";

export const EP_BIN = join(ROOT, "bin", "ep.js");

export interface EpResult {
  code: number;
  stdout: string;
  stderr: string;
  json(): any;
}

export function assertBuilt(): void {
  if (!existsSync(join(ROOT, "dist", "cli", "main.js")))
    throw new Error("run 'npm run build' first: dist/cli/main.js is missing");
}

/** Async on purpose: an in-process tower in the test needs the event loop while ep runs. */
/** `onStdout`: called with everything printed so far, as it arrives (a test can act once a line is out). */
export function ep(
  args: string[],
  opts: {
    env?: Record<string, string | undefined>;
    input?: string;
    timeoutMs?: number;
    onStdout?: (sofar: string) => void;
  } = {},
): Promise<EpResult> {
  return new Promise((resolve, reject) => {
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries({ ...process.env, EP_BASE_URL: undefined, EP_TOKEN: undefined, ...opts.env }))
      if (v !== undefined) env[k] = v;
    const child = spawn(process.execPath, [EP_BIN, ...args], { env, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
      opts.onStdout?.(stdout);
    });
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`ep ${args.join(" ")} did not finish: ${stdout} ${stderr}`));
    }, opts.timeoutMs ?? 20_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? 1, stdout, stderr, json: () => JSON.parse(stdout) });
    });
    child.stdin.end(opts.input ?? "");
  });
}
