// What the machine charges for the operations a claimed task is made of, apart from EP: the file
// system calls of a run directory (a new inode against a rename or an overwrite) and a loopback
// TCP round trip between two processes at a low and at a saturating rate. They explain where
// epd's CPU per task goes in bench/wakeup.ts (docs/perf-history.md, "Run directories recycled").
//   node scripts/run-ts.mjs bench/host-costs.ts [--files 2000] [--dir /tmp]
import { fork } from "node:child_process";
import {
  closeSync,
  ftruncateSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  renameSync,
  rmSync,
  utimesSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { connect, createServer, type AddressInfo } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

if (process.env.EP_BENCH_ROLE === "echo") {
  const server = createServer((c) => {
    c.setNoDelay(true);
    c.on("data", (d) => c.write(d));
  }).listen(0, "127.0.0.1", () => process.send!((server.address() as AddressInfo).port));
} else {
  const { values } = parseArgs({
    options: { files: { type: "string", default: "2000" }, dir: { type: "string", default: "/tmp" } },
  });
  const N = Number(values.files);
  const out: Record<string, unknown> = {};

  /** CPU µs per call (user + system) of f over N calls. */
  const cpu = (f: (i: number) => void): number => {
    const c0 = process.cpuUsage();
    for (let i = 0; i < N; i++) f(i);
    const c = process.cpuUsage(c0);
    return Number(((c.user + c.system) / N).toFixed(1));
  };
  const base = mkdtempSync(join(values.dir!, "ep-host-costs-"));
  const body = JSON.stringify(
    {
      mcpServers: {
        ep: {
          type: "stdio",
          command: "/usr/local/bin/epd",
          args: ["mcp"],
          env: { EP_AGENT_ID: "agt_x", EP_TASK_ID: "tsk_x" },
        },
      },
    },
    null,
    2,
  );
  try {
    mkdirSync(join(base, "w"));
    out.fs_us_per_call = {
      mkdir: cpu((i) => mkdirSync(join(base, "w", `d${i}`), { mode: 0o700 })),
      create_file: cpu((i) => writeFileSync(join(base, "w", `d${i}`, ".ep-mcp.json"), body, { mode: 0o600 })),
      readdir: cpu((i) => readdirSync(join(base, "w", `d${i}`))),
      rename_dir: cpu((i) => renameSync(join(base, "w", `d${i}`), join(base, "w", `e${i}`))),
      utimes: cpu((i) => utimesSync(join(base, "w", `e${i}`), new Date(), new Date())),
      overwrite_truncating: cpu((i) => writeFileSync(join(base, "w", `e${i}`, ".ep-mcp.json"), body)),
      overwrite_in_place: cpu((i) => {
        const fd = openSync(join(base, "w", `e${i}`, ".ep-mcp.json"), "r+");
        writeSync(fd, body, 0);
        ftruncateSync(fd, body.length);
        closeSync(fd);
      }),
    };
  } finally {
    rmSync(base, { recursive: true, force: true });
  }

  // a 600-byte message to an echo process and back, one at a time, at a fixed rate and flat out
  const echo = fork(fileURLToPath(import.meta.url), [], {
    env: { ...process.env, EP_BENCH_ROLE: "echo" },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const port = await new Promise<number>((resolve) => echo.once("message", (m) => resolve(m as number)));
  const sock = connect(port, "127.0.0.1");
  sock.setNoDelay(true);
  await new Promise((resolve) => sock.once("connect", resolve));
  const msg = Buffer.alloc(600, "x");
  const rtt: Record<string, number> = {};
  for (const rate of [200, 1000, 0]) {
    const n = rate ? rate * 3 : 20_000;
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const back = new Promise((resolve) => sock.once("data", resolve));
      sock.write(msg);
      await back;
      const wait = rate ? t0 + ((i + 1) * 1000) / rate - performance.now() : 0;
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
    const c = process.cpuUsage(c0);
    rtt[rate ? `at_${rate}_per_s` : "flat_out"] = Number(((c.user + c.system) / n).toFixed(1));
  }
  out.loopback_round_trip_client_cpu_us = rtt;
  sock.destroy();
  echo.kill();
  console.log(JSON.stringify(out));
}
