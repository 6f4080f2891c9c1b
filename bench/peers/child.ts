// A child process of the peers bench (worker or submitter): a TypeScript file of this folder run
// through scripts/run-ts.mjs (bundled next to it, so it resolves the peer libraries from
// bench/peers/node_modules), spoken to over IPC one request at a time.
import { spawn, type ChildProcess } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { CONFIG_ENV, type SubmitConfig } from "./peer-config.js";

export const HERE = dirname(fileURLToPath(import.meta.url));
const RUN_TS = join(HERE, "..", "..", "scripts", "run-ts.mjs");

export interface Child {
  pid: number;
  /** sends a message and resolves with the child's next message */
  request<T>(message: unknown): Promise<T>;
  stop(): Promise<void>;
}

/** Starts `file` (worker or submitter) with its system's config; resolves once it says it is ready. */
export async function startChild(file: "peer-worker.ts" | "submitter.ts", config: SubmitConfig): Promise<Child> {
  const child: ChildProcess = spawn(process.execPath, [RUN_TS, join(HERE, file)], {
    env: { ...process.env, [CONFIG_ENV]: JSON.stringify(config) },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const next = <T>(): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const onExit = (code: number | null) =>
        reject(new Error(`${file} (${config.system}) exited ${code} before answering`));
      child.once("exit", onExit);
      child.once("message", (m) => {
        child.off("exit", onExit);
        resolve(m as T);
      });
    });
  await next<{ ready: true }>();
  return {
    pid: child.pid!,
    request<T>(message: unknown) {
      const reply = next<T>();
      child.send(message as object);
      return reply;
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode) return;
      child.send({ cmd: "stop" });
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
