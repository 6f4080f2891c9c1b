// `ep system doctor` against real pieces: the local fan-out of a built epd (EP_FANOUT_LISTEN)
// following a built tower that throttles the node's stream (EP_STREAM_RATE_LIMIT), and the
// runtime binaries epd would start (runtimes.toml over the shared defaults).
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { registerNode, spawnEpd, spawnTowerProcess } from "./epd-harness.js";
import { buildAll, buildCli, type EpResult } from "./fleet-harness.js";
import { freePort, tempHome, useCleanups, waitFor } from "./harness.js";

const cleanup = useCleanups();

beforeAll(async () => {
  await buildAll();
}, 90_000);

/** The CLI bundled from this tree, with exactly this environment (plus node's own PATH unless given). */
async function doctor(env: Record<string, string>, json = true): Promise<EpResult> {
  const cli = await buildCli();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cli, "system", "doctor", ...(json ? ["--json"] : [])], {
      env: { PATH: process.env.PATH ?? "", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr, json: () => JSON.parse(stdout) }));
  });
}

function checks(r: EpResult): Record<string, { ok: boolean; level: string; detail: string; hint?: string }> {
  return Object.fromEntries((r.json().checks as { check: string }[]).map((c) => [c.check, c])) as never;
}

/** One SSE connection to the tower's stream with a token, kept open until the test ends. */
function openStream(url: string, token: string): void {
  const ctl = new AbortController();
  cleanup(() => ctl.abort());
  void fetch(`${url}/events/stream`, {
    headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" },
    signal: ctl.signal,
  })
    .then(async (res) => {
      for await (const _ of res.body as unknown as AsyncIterable<Uint8Array>) void _;
    })
    .catch(() => undefined);
}

describe("ep system doctor: fanout_rate_limit", () => {
  it("reports the tower throttling the daemon's event stream, with the pause's end and a hint", async () => {
    const h = tempHome("ep-doctor-fanout-");
    cleanup(() => h.cleanup());
    // two new stream connections per minute per token: the fan-out's is the first
    const tower = await spawnTowerProcess(h.dir, { EP_STREAM_RATE_LIMIT: "2" });
    cleanup(() => tower.stop());
    const nodeFile = join(h.dir, "etc", "node.json");
    const { token: nodeToken } = await registerNode(tower.url, tower.adminToken, nodeFile);
    const listen = `127.0.0.1:${await freePort()}`;
    const epd = await spawnEpd({ home: h.dir, nodeFile, backendUrl: tower.url, env: { EP_FANOUT_LISTEN: listen } });
    cleanup(() => epd.stop());
    const stats = async () =>
      (await (await fetch(`http://${listen}/stats`)).json()) as { upstream: string; throttledUntil: string | null };
    await waitFor(async () => (await stats().catch(() => undefined))?.upstream === "connected", 10_000);

    const env = {
      EP_HOME: h.dir,
      EP_BASE_URL: tower.url,
      EP_TOKEN: tower.adminToken,
      EP_NODE_FILE: nodeFile,
      EP_FANOUT_LISTEN: listen,
    };
    const calm = checks(await doctor(env)).fanout_rate_limit;
    expect(calm).toMatchObject({ ok: true, level: "ok" });
    expect(calm.detail).toMatch(/upstream connected, last event \d+, 0 local client\(s\), not throttled$/);

    // a second stream with the node's token takes its last token: every stream of the node is throttled
    openStream(tower.url, nodeToken);
    await waitFor(async () => (await stats()).throttledUntil !== null, 10_000);
    const r = await doctor(env);
    const c = checks(r).fanout_rate_limit;
    expect(c).toMatchObject({ ok: false, level: "warn" });
    const throttled = new RegExp(
      String.raw`the tower is throttling the daemon's event stream \(rate_limit\.remaining 0 since \S+\); ` +
        String.raw`the fan-out holds retransmission until \S+ \(1 pause\(s\) so far\)`,
    );
    expect(c.detail).toMatch(throttled);
    const until = Date.parse(/until (\S+) \(/.exec(c.detail)![1]);
    expect(until).toBeGreaterThan(Date.now());
    expect(c.hint).toMatch(/EP_STREAM_RATE_LIMIT/);
    // a warning: it does not fail the run on its own
    const errors = (r.json().checks as { ok: boolean; level: string }[]).filter((x) => !x.ok && x.level === "error");
    expect(r.code).toBe(errors.length ? 1 : 0);
    const human = await doctor(env, false);
    expect(human.stdout).toMatch(/fanout_rate_limit\s+the tower is throttling/);
    expect(human.stdout).toMatch(/hint: nothing is lost/);
  }, 60_000);

  it("fails the check when no fan-out answers at EP_FANOUT_LISTEN", async () => {
    const h = tempHome("ep-doctor-nofanout-");
    cleanup(() => h.cleanup());
    const listen = `127.0.0.1:${await freePort()}`;
    const r = await doctor({
      EP_HOME: h.dir,
      EP_BASE_URL: `http://127.0.0.1:${await freePort()}`,
      EP_FANOUT_LISTEN: listen,
    });
    expect(r.code).toBe(1);
    expect(checks(r).fanout_rate_limit).toMatchObject({
      ok: false,
      level: "error",
      detail: expect.stringContaining(`cannot reach the local fan-out at http://${listen}`),
      hint: expect.stringContaining("EP_FANOUT_LISTEN"),
    });
  }, 30_000);
});

describe("ep system doctor: runtime binaries", () => {
  it("checks the commands epd would run: claude-code-acp " +
    "for vendorA_agent_acp, runtimes.toml over the defaults", async () => {
    const h = tempHome("ep-doctor-rt-");
    cleanup(() => h.cleanup());
    const bin = join(h.dir, "bin");
    mkdirSync(bin);
    const fake = (name: string) => {
      writeFileSync(join(bin, name), "#!/bin/sh\nexit 0\n");
      chmodSync(join(bin, name), 0o755);
    };
    fake("claude"); // the vendorA_code CLI is installed, its ACP adapter is not
    const env = { EP_HOME: h.dir, EP_BASE_URL: `http://127.0.0.1:${await freePort()}`, PATH: `${bin}:/usr/bin:/bin` };

    const before = checks(await doctor(env));
    expect(before.runtime_bash).toMatchObject({ ok: true, level: "ok" });
    expect(before.runtime_claude).toMatchObject({
      ok: true,
      level: "ok",
      detail: `${join(bin, "claude")} (vendorA_code / muxhost_hosted runtimes)`,
    });
    expect(before["runtime_claude-code-acp"]).toMatchObject({
      ok: false,
      level: "warn",
      detail: "claude-code-acp is not on PATH (vendorA_agent_acp runtime unavailable)",
      hint: `install claude-code-acp or set [vendorA_agent_acp] command in ${join(h.dir, "epd", "runtimes.toml")}`,
    });
    expect(before.runtimes_config).toBeUndefined();

    fake("claude-code-acp");
    expect(checks(await doctor(env))["runtime_claude-code-acp"]).toMatchObject({
      ok: true,
      detail: `${join(bin, "claude-code-acp")} (vendorA_agent_acp runtime)`,
    });

    // runtimes.toml names other commands: those are what doctor checks
    mkdirSync(join(h.dir, "epd"));
    const acp = join(h.dir, "opt-acp");
    writeFileSync(acp, "#!/bin/sh\n");
    chmodSync(acp, 0o755);
    writeFileSync(
      join(h.dir, "epd", "runtimes.toml"),
      `[vendorA_agent_acp]\ncommand = "${acp}"\n\n[vendorB]\ncommand = "my-codex"\n`,
    );
    const configured = checks(await doctor(env));
    expect(configured.runtimes_config).toMatchObject({ ok: true });
    expect(configured["runtime_opt-acp"]).toMatchObject({ ok: true, detail: `${acp} (vendorA_agent_acp runtime)` });
    expect(configured["runtime_claude-code-acp"]).toBeUndefined();
    expect(configured.runtime_codex).toBeUndefined();
    expect(configured["runtime_my-codex"]).toMatchObject({
      ok: false,
      detail: "my-codex is not on PATH (vendorB runtime unavailable)",
      hint: expect.stringContaining("[vendorB] command"),
    });

    // a file epd would refuse is an error, and the defaults are checked meanwhile
    writeFileSync(join(h.dir, "epd", "runtimes.toml"), "[vendorA_agent_acp\ncommand = 1\n");
    const broken = await doctor(env);
    expect(broken.code).toBe(1);
    expect(checks(broken).runtimes_config).toMatchObject({
      ok: false,
      level: "error",
      detail: expect.stringMatching(/runtimes\.toml: not valid TOML/),
      hint: expect.stringContaining("epd refuses to start"),
    });
    expect(checks(broken)["runtime_claude-code-acp"]).toMatchObject({ ok: true });
    // doctor never rewrites it
    expect(readFileSync(join(h.dir, "epd", "runtimes.toml"), "utf8")).toContain("command = 1");
  }, 60_000);
});

describe("ep system doctor: runtimes as epd sees them", () => {
  it("prints a long PATH once, not in every missing executable's line (issue 38)", async () => {
    const h = tempHome("ep-doctor-path-");
    cleanup(() => h.cleanup());
    const tower = await spawnTowerProcess(h.dir);
    cleanup(() => tower.stop());
    const nodeFile = join(h.dir, "node.json");
    await registerNode(tower.url, tower.adminToken, nodeFile);
    // none of the agent CLIs on epd's PATH: each is reported missing
    const longPath = ["/usr/bin", "/bin", ...Array.from({ length: 12 }, (_, i) => `/opt/nowhere-${i}/bin`)].join(":");
    const epd = await spawnEpd({ home: h.dir, nodeFile, backendUrl: tower.url, env: { PATH: longPath } });
    cleanup(() => epd.stop());
    const env = {
      EP_HOME: h.dir,
      EP_BASE_URL: tower.url,
      EP_TOKEN: tower.adminToken,
      EP_NODE_FILE: nodeFile,
      PATH: "/usr/bin:/bin",
    };
    const human = await doctor(env, false);
    expect(human.stdout.split(longPath).length - 1, human.stdout).toBe(1);
    expect(human.stdout).toMatch(/runtime_claude\s+claude is not on the runs' PATH \(/);
    // epd puts its own bin folder first on the runs' PATH
    expect(human.stdout).toMatch(new RegExp(`ok\\s+path\\s+the PATH searched above: \\S*epd/bin:${longPath}\n`));
    const c = checks(await doctor(env));
    expect(c.path).toMatchObject({ ok: true, level: "ok", detail: expect.stringMatching(new RegExp(`${longPath}$`)) });
  }, 60_000);

  it("reports the executables on epd's PATH, with their version, not the shell's", async () => {
    const h = tempHome("ep-doctor-epd-");
    cleanup(() => h.cleanup());
    const tower = await spawnTowerProcess(h.dir);
    cleanup(() => tower.stop());
    const nodeFile = join(h.dir, "node.json");
    await registerNode(tower.url, tower.adminToken, nodeFile);
    // epd runs with the fixture CLIs on its PATH; the shell running `ep` does not have them
    const epd = await spawnEpd({ home: h.dir, nodeFile, backendUrl: tower.url });
    cleanup(() => epd.stop());
    const env = {
      EP_HOME: h.dir,
      EP_BASE_URL: tower.url,
      EP_TOKEN: tower.adminToken,
      EP_NODE_FILE: nodeFile,
      PATH: "/usr/bin:/bin",
    };
    const c = checks(await doctor(env));
    expect(c.runtime_claude).toMatchObject({ ok: true, level: "ok" });
    expect(c.runtime_claude.detail).toMatch(/fixtures\/claude.*as epd sees it/);
    expect(c.runtime_codex).toMatchObject({ ok: true });
    expect(c.runtime_bash.detail).toMatch(/GNU bash/); // its --version
  }, 60_000);
});
