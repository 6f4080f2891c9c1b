// Runs are forked by a small helper process, not by epd (docs/daemon.md, "Who forks a run").
// fork() copies the page tables of the process that calls it and the exec that follows tears
// them down again: in epd, whose memory grows to a few hundred MB over a day of work, that was
// most of a shell task's CPU and grew with every task run (docs/perf-history.md, 2026-12-03).
// The helper is `node -e` with this file's HELPER and nothing else loaded; epd sends it what to
// spawn over the IPC channel. The run's stdout and stderr are unix sockets the helper connects
// to epd's spawn.sock (a line with a one-time token first) and hands to the run as its fds, so
// the output goes from the run to epd directly, as through the socketpairs Node would make.
// The helper exits with epd (its channel closes); runs go on without it, as they outlive epd.
import { spawn as spawnChild, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { EventEmitter } from "node:events";
import { rmSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { PassThrough } from "node:stream";
import type { Logger } from "../../common/log.js";

/** What a runtime needs of a started process: ChildProcess has it, and so has a run the helper started. */
export interface Spawned {
  /** The leader's pid: known at once for a ChildProcess, at the `spawn` event for the helper's. */
  readonly pid: number | undefined;
  readonly stdout: NodeJS.ReadableStream & { destroy(): void; setEncoding(e: BufferEncoding): NodeJS.ReadableStream };
  readonly stderr: NodeJS.ReadableStream & { destroy(): void; setEncoding(e: BufferEncoding): NodeJS.ReadableStream };
  on(event: "spawn", fn: () => void): this;
  on(event: "error", fn: (err: NodeJS.ErrnoException) => void): this;
  on(event: "exit", fn: (code: number | null, signal: NodeJS.Signals | null) => void): this;
  on(event: "close", fn: () => void): this;
}

export interface SpawnOptions {
  cwd?: string;
  env: Record<string, string>;
}

/** A detached process group leader with stdin ignored and stdout/stderr read by epd. */
export type SpawnFn = (file: string, args: readonly string[], o: SpawnOptions) => Spawned;

/** Node's own spawn, from this process: for the runtimes' unit tests and tools without an epd. */
export const spawnHere: SpawnFn = (file, args, o) =>
  spawnChild(file, args, {
    cwd: o.cwd,
    env: o.env,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  }) as ChildProcess & Spawned;

// The helper. CommonJS for `node -e`; argv[1] is spawn.sock. A message {id, token, file, args,
// cwd, env} spawns; it answers {id, pid}, then {id, exit, signal}, or {id, error}.
const HELPER = `
const { spawn } = require("node:child_process");
const net = require("node:net");
const path = process.argv[1];
process.on("disconnect", () => process.exit(0));
const send = (m) => process.connected && process.send(m);
const errorOf = (e) => ({ message: e.message, code: e.code, errno: e.errno, syscall: e.syscall, path: e.path });
const connect = (token) =>
  new Promise((resolve, reject) => {
    const s = net.connect(path, () => s.write(token + "\\n", () => resolve(s)));
    s.once("error", reject);
  });
process.on("message", async (m) => {
  const fds = [];
  try {
    fds.push(await connect(m.token + "1"), await connect(m.token + "2"));
    const child = spawn(m.file, m.args, { cwd: m.cwd, env: m.env, detached: true, stdio: ["ignore", fds[0], fds[1]] });
    child.on("error", (e) => send({ id: m.id, error: errorOf(e) }));
    child.on("exit", (code, signal) => send({ id: m.id, exit: code, signal }));
    if (child.pid !== undefined) send({ id: m.id, pid: child.pid });
  } catch (e) {
    send({ id: m.id, error: errorOf(e) });
  } finally {
    for (const s of fds) s.destroy();
  }
});
`;

interface Pending {
  run: HelperRun;
  /** the sockets not yet connected, by token */
  tokens: string[];
}

class HelperRun extends EventEmitter implements Spawned {
  pid: number | undefined;
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  exited = false;
  private open = 2;
  constructor() {
    super();
    for (const s of [this.stdout, this.stderr]) {
      // output the run still writes after fail() ended its streams has nowhere to go
      s.on("error", () => undefined);
      s.once("close", () => {
        if (--this.open === 0) this.maybeClose();
      });
    }
  }
  maybeClose(): void {
    if (this.exited && this.open === 0) this.emit("close");
  }
  /** The run cannot report any more (a spawn error, the helper gone): its streams end, and it closes. */
  fail(err: NodeJS.ErrnoException): void {
    if (this.exited) return;
    this.emit("error", err);
    this.exited = true;
    this.stdout.end();
    this.stderr.end();
    this.maybeClose();
  }
}

export interface Spawner {
  spawn: SpawnFn;
  /** Stops the helper (runs go on) and the socket. */
  close(): Promise<void>;
}

/** The helper and its socket start at the first spawn; `socketPath` is in epd's own directory. */
export function createSpawner(socketPath: string, log: Logger): Spawner {
  let helper: ChildProcess | undefined;
  let server: Server | undefined;
  let listening: Promise<void> | undefined;
  let closed = false;
  let seq = 0;
  const runs = new Map<number, Pending>();
  /** token -> the stream a connection with it feeds */
  const streams = new Map<string, PassThrough>();

  function accept(sock: Socket): void {
    let head: Buffer = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = head.length ? Buffer.concat([head, chunk]) : chunk;
      const nl = head.indexOf(10);
      if (nl < 0) {
        if (head.length > 64) sock.destroy();
        return;
      }
      sock.off("data", onData);
      sock.pause();
      const token = head.subarray(0, nl).toString("latin1");
      const target = streams.get(token);
      if (!target) return void sock.destroy();
      streams.delete(token); // one connection per token
      if (nl + 1 < head.length) sock.unshift(head.subarray(nl + 1));
      sock.on("error", () => undefined);
      // destroying the run's stream (a straggler holding it open) lets go of the socket too
      target.once("close", () => sock.destroy());
      sock.pipe(target);
    };
    sock.on("data", onData);
    sock.on("error", () => undefined);
  }

  function start(): Promise<void> {
    if (listening) return listening;
    rmSync(socketPath, { force: true });
    server = createServer(accept);
    listening = new Promise((resolve, reject) => {
      server!.once("error", reject);
      server!.listen(socketPath, () => resolve());
    });
    server.unref();
    const h = spawnChild(process.execPath, ["-e", HELPER, socketPath], {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
      env: { PATH: process.env.PATH ?? "" },
    });
    helper = h;
    h.unref();
    h.channel?.unref();
    h.on(
      "message",
      (m: {
        id: number;
        pid?: number;
        exit?: number | null;
        signal?: NodeJS.Signals | null;
        error?: NodeJS.ErrnoException;
      }) => {
        const p = runs.get(m.id);
        if (!p) return;
        const { run } = p;
        if (m.pid !== undefined) {
          run.pid = m.pid;
          run.emit("spawn");
        } else if (m.error) {
          runs.delete(m.id);
          for (const t of p.tokens) streams.delete(t);
          run.fail(Object.assign(new Error(m.error.message), m.error));
        } else if ("exit" in m) {
          runs.delete(m.id);
          run.exited = true;
          run.emit("exit", m.exit ?? null, m.signal ?? null);
          run.maybeClose();
        }
      },
    );
    h.on("exit", (code, signal) => {
      if (helper === h) helper = undefined;
      listening = undefined;
      server?.close();
      server = undefined;
      if (closed) return;
      log.warn("the spawn helper exited; runs it started report no status, the next run starts a new one", {
        code,
        signal,
        runs: runs.size,
      });
      for (const [id, p] of runs) {
        runs.delete(id);
        for (const t of p.tokens) streams.delete(t);
        const err: NodeJS.ErrnoException = new Error(
          "epd's spawn helper exited while the run went on; its exit status is unknown",
        );
        err.code = "ESPAWNHELPER";
        p.run.fail(err);
      }
    });
    return listening;
  }

  const spawn: SpawnFn = (file, args, o) => {
    const run = new HelperRun();
    if (closed) {
      queueMicrotask(() => run.fail(Object.assign(new Error("epd is stopping"), { code: "ECANCELED" })));
      return run;
    }
    const id = ++seq;
    const token = randomBytes(12).toString("hex");
    const tokens = [token + "1", token + "2"];
    streams.set(tokens[0]!, run.stdout);
    streams.set(tokens[1]!, run.stderr);
    runs.set(id, { run, tokens });
    start().then(
      () => helper?.send({ id, token, file, args, cwd: o.cwd, env: o.env }),
      (err: NodeJS.ErrnoException) => {
        runs.delete(id);
        for (const t of tokens) streams.delete(t);
        run.fail(err);
      },
    );
    return run;
  };

  return {
    spawn,
    async close() {
      closed = true;
      helper?.disconnect();
      helper = undefined;
      server?.close();
      server = undefined;
      rmSync(socketPath, { force: true });
    },
  };
}
