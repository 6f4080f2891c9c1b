// A preload: the CPU of each of this process's threads from THREAD_CPU_DELAY ms (default 8000) to exit, by
// thread (main, and the others by name: V8's workers and libuv's pool are "node"), printed to stderr as
// THREADS {...}. For the tower inside a bench (not its submitter):
//   node -r ./bench/thread-cpu.cjs scripts/run-ts.mjs bench/wakeup.ts --runs none --tasks 4000
if (process.env.EP_BENCH_ROLE !== "submitter") {
  const fs = require("node:fs");
  const read = () => {
    const out = new Map();
    for (const tid of fs.readdirSync("/proc/self/task")) {
      try {
        const s = fs.readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
        const comm = s.slice(s.indexOf("(") + 1, s.lastIndexOf(")"));
        const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
        out.set(tid, { comm, u: +f[11], s: +f[12] });
      } catch {}
    }
    return out;
  };
  let t0;
  setTimeout(() => (t0 = read()), Number(process.env.THREAD_CPU_DELAY || 8000)).unref();
  process.on("exit", () => {
    if (!t0) return;
    const t1 = read();
    const by = new Map();
    for (const [tid, v] of t1) {
      const b = t0.get(tid) ?? { u: 0, s: 0 };
      const k = tid == process.pid ? "main" : v.comm;
      const e = by.get(k) ?? { u: 0, s: 0, n: 0 };
      e.u += v.u - b.u; e.s += v.s - b.s; e.n++;
      by.set(k, e);
    }
    process.stderr.write("THREADS " + JSON.stringify(Object.fromEntries([...by].map(([k, e]) => [k, `${e.n}: u${e.u * 10} s${e.s * 10} ms`]))) + "\n");
  });
}
