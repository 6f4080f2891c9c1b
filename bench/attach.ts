// Mediated attach: keystroke round trip and output throughput through the tower (in this
// process) and a real epd (built, child process) to a tmux-hosted shell, beside a direct PTY
// (node-pty in this process) running the same program as the reference.
//   npx esbuild bench/attach.ts --bundle --platform=node --format=esm --packages=external \
//     --outfile=dist/bench/attach.mjs && node dist/bench/attach.mjs [--keys 500] [--mb 40]
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import pty from "node-pty";
import { WebSocket } from "ws";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { AgentService } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { registerNode, spawnEpd } from "../tests/epd-harness.js";
import { startTower, tempHome, waitFor } from "../tests/harness.js";

const { values } = parseArgs({
  options: { keys: { type: "string", default: "500" }, mb: { type: "string", default: "40" } },
});
const KEYS = Number(values.keys);
const MB = Number(values.mb);
const SOCKET = `ep-bench-attach-${process.pid}`;

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One byte-oriented terminal: write bytes, wait until the output contains a marker. */
interface Term {
  write(s: string): void;
  waitFor(marker: string): Promise<void>;
  received(): number;
  close(): void;
}

function watch(onData: (cb: (d: Buffer) => void) => void): Pick<Term, "waitFor" | "received"> {
  let tail = "";
  let bytes = 0;
  let want: { marker: string; resolve(): void } | undefined;
  onData((d) => {
    bytes += d.length;
    if (!want) return;
    tail = (tail + d.toString("latin1")).slice(-4096);
    if (tail.includes(want.marker)) {
      const w = want;
      want = undefined;
      tail = "";
      w.resolve();
    }
  });
  return {
    received: () => bytes,
    waitFor: (marker) => new Promise<void>((resolve) => (want = { marker, resolve })),
  };
}

function directPty(command: string[]): Term {
  const p = pty.spawn(command[0], command.slice(1), {
    cols: 200,
    rows: 50,
    env: { ...process.env, PS1: "$ " } as Record<string, string>,
    encoding: null,
  });
  const w = watch((cb) => p.onData((d: string | Buffer) => cb(typeof d === "string" ? Buffer.from(d) : d)));
  return { ...w, write: (s) => p.write(s), close: () => p.kill() };
}

async function viaTower(url: string): Promise<Term> {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  const w = watch((cb) => ws.on("message", (d: Buffer, bin) => bin && cb(d)));
  await new Promise<void>((resolve, reject) => {
    ws.on("message", (d: Buffer, bin) => !bin && JSON.parse(d.toString()).type === "hello" && resolve());
    ws.on("error", reject);
  });
  return { ...w, write: (s) => ws.send(Buffer.from(s), { binary: true }), close: () => ws.close() };
}

async function roundTrips(t: Term, n: number): Promise<number[]> {
  const xs: number[] = [];
  for (let i = 0; i < n + 50; i++) {
    const ch = String.fromCharCode(97 + (i % 26));
    const marker = t.waitFor(ch);
    const t0 = performance.now();
    t.write(ch);
    await marker;
    if (i >= 50) xs.push(performance.now() - t0); // the first 50 warm up
    await sleep(1);
  }
  t.write("\x15"); // clear the line (cat: kill the pending input)
  return xs;
}

async function throughput(
  t: Term,
  mb: number,
): Promise<{ seconds: number; producedMBs: number; deliveredMBs: number }> {
  const bytes = mb * 1_000_000;
  const before = t.received();
  const done = t.waitFor("DONE-MARK-7");
  const t0 = performance.now();
  t.write(`head -c ${bytes} /tmp/ep-bench-attach.txt; echo DONE-MARK-$((3+4))\r`);
  await done;
  const seconds = (performance.now() - t0) / 1000;
  return { seconds, producedMBs: mb / seconds, deliveredMBs: (t.received() - before) / 1e6 / seconds };
}

// printable lines, so every terminal on the way does real work
const line = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-+".repeat(3) + "\n";
writeFileSync("/tmp/ep-bench-attach.txt", line.repeat(Math.ceil((MB * 1_000_000) / line.length)));

const home = tempHome("ep-bench-attach-");
const t = await startTower({ home: home.dir });
const nodeFile = join(home.dir, "node.json");
await registerNode(t.url, t.adminToken, nodeFile);
const domainId = (await t.client(WorkService).createDomain({ name: "bench" })).domain!.id;
const epdHome = join(home.dir, "epd");
(await import("node:fs")).mkdirSync(epdHome, { recursive: true, mode: 0o700 });
writeFileSync(
  join(epdHome, "agents.toml"),
  `[[agent]]
id = "cat"
runtime = "muxhost_hosted"
domain = "${domainId}"
command = ["cat"]

[[agent]]
id = "sh"
runtime = "muxhost_hosted"
domain = "${domainId}"
command = ["bash", "--norc", "--noprofile"]
env = { PS1 = "$ " }
`,
);
const epd = await spawnEpd({
  home: home.dir,
  nodeFile,
  backendUrl: t.url,
  env: { EP_TMUX_SOCKET: SOCKET, EP_LOG_LEVEL: "warn", EP_SUPERVISE_BACKEND: "process" },
});
await waitFor(async () => (await t.client(AgentService).listAgents({ domainId })).agents.length === 2, 15_000);
const agents = (await t.client(AgentService).listAgents({ domainId })).agents;
const byName = new Map(agents.map((a) => [a.name, a.id]));
const attachUrl = async (name: string) => {
  const ticket = (await t.client(AuthService).createTicket({ purpose: "attach", agentId: byName.get(name)! })).ticket;
  return `${t.url.replace(/^http/, "ws")}/api/attach-ws?ticket=${ticket}&cols=200&rows=50`;
};

const results: Record<string, unknown> = {};
// keystroke round trip: cat in a pane (the tty echoes) vs cat in a direct PTY
{
  const ref = directPty(["cat"]);
  await sleep(300);
  const refRtt = await roundTrips(ref, KEYS);
  ref.close();
  const tower = await viaTower(await attachUrl("cat"));
  await sleep(500);
  const rtt = await roundTrips(tower, KEYS);
  tower.close();
  results.keystroke_ms = {
    direct_pty: { p50: pct(refRtt, 50), p99: pct(refRtt, 99) },
    through_tower: { p50: pct(rtt, 50), p99: pct(rtt, 99) },
  };
}
// output throughput: the same file printed in a shell
{
  const ref = directPty(["bash", "--norc", "--noprofile"]);
  await sleep(300);
  const refT = await throughput(ref, MB);
  ref.close();
  // the same pane with a tmux client of our own: what tmux alone allows
  const env = { ...process.env, TERM: "xterm-256color" } as Record<string, string>;
  delete env.TMUX;
  const paneClient = directPty(["tmux", "-L", SOCKET, "-u", "attach-session", "-t", "=sh"]);
  void env;
  await sleep(500);
  const tmuxT = await throughput(paneClient, MB);
  paneClient.close();
  await sleep(300);
  const tower = await viaTower(await attachUrl("sh"));
  await sleep(500);
  const tT = await throughput(tower, MB);
  tower.close();
  results.throughput = { mb: MB, direct_pty: refT, tmux_client_direct: tmuxT, through_tower: tT };
}
console.log(JSON.stringify(results, null, 2));

await epd.stop();
await new Promise((r) => execFile("tmux", ["-L", SOCKET, "kill-server"], r));
await t.close();
home.cleanup();
process.exit(0);
