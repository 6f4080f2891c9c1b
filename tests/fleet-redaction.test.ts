// The fleet's events go through the secrets broker's redaction like the worker's: a profile
// agent's signal run that prints a secret it fetched publishes [redacted:NAME], never the value.
// A tmux-hosted profile agent that prints it on its terminal: the pane log on disk has
// [redacted:NAME] (tmux pipes the pane into a FIFO the daemon reads, runtimes/pane-pipe.ts).
// In-process tower (with a secret-store key) and daemon; the run is a real `shell` subprocess
// reading the secret with a raw line on $EP_SECRETS_SOCKET.
import { randomBytes } from "node:crypto";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../common/log.js";
import { createDaemon, type Daemon } from "../daemon/daemon.js";
import { jsonRpcCall } from "../daemon/mgmt/client.js";
import { SecretService } from "../gen/ep/tower/v1/secrets_pb.js";
import { NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { startTower, waitFor, type TestTower } from "./harness.js";
import { optionalTool } from "./optional-tools.js";

const tmuxTool = optionalTool("tmux", { pkg: "tmux", suite: "fleet-redaction" });
const SOCKET = `ep-redact-${process.pid}`;

const VALUE = `Fl33t-${randomBytes(12).toString("hex")}`;
/** Prints the secret DB_PASSWORD as the broker answers it (a raw request line on the socket). */
const PRINT_SECRET =
  `${JSON.stringify(process.execPath)} -e 'const s=require("net").connect(process.env.EP_SECRETS_SOCKET);` +
  `s.on("connect",()=>s.write(JSON.stringify({op:"get",` +
  `session:process.env.EP_SECRETS_SESSION,name:"DB_PASSWORD"})+"\\n"));let b="";s.on("data",d=>{b+=d;` +
  `if(b.includes("\\n")){const r=JSON.parse(b);console.log("password is "+r.value);s.end()}})'`;

let t: TestTower;
let daemon: Daemon;
let daemonOptions: Parameters<typeof createDaemon>[0];
let home: string;

beforeAll(async () => {
  t = await startTower({ env: { EP_SECRET_KEY: randomBytes(32).toString("base64") } });
  const reg = await t.client(NodeService).registerNode({ hostname: "fleet-redaction" });
  const domainId = (await t.client(WorkService).createDomain({ name: "fleet-secrets" })).domain!.id;
  const secrets = t.client(SecretService);
  await secrets.setSecret({ name: "DB_PASSWORD", domainId, value: VALUE });
  await secrets.grantSecret({ name: "DB_PASSWORD", domainId });

  home = mkdtempSync(join(tmpdir(), "ep-fleet-redaction-"));
  mkdirSync(join(home, "epd"), { recursive: true, mode: 0o700 });
  let agents = `[[agent]]\nid = "leaky"\nruntime = "shell"\ndomain = "${domainId}"\n`;
  if (!tmuxTool.skip) {
    tmuxTool.require();
    agents +=
      `\n[[agent]]\nid = "paney"\nruntime = "muxhost_hosted"\nsession = "paney"\ncommand ` +
      `= ["bash", "--norc", "--noprofile"]\ndomain = "${domainId}"\nsupervise = true\n`;
  }
  writeFileSync(join(home, "epd", "agents.toml"), agents);
  daemonOptions = {
    identity: { node_id: reg.node!.id, hostname: "fleet-redaction", token: reg.token, tower_url: t.url },
    backendUrl: t.url,
    log: silentLogger,
    env: {
      EP_HOME: home,
      PATH: process.env.PATH,
      EP_SUPERVISE_BACKEND: "process",
      EP_TMUX_SOCKET: SOCKET,
      EP_CRON_TICK_MS: "200",
    },
    pollMs: 60_000,
  };
  daemon = await createDaemon(daemonOptions);
  await daemon.start();
  await waitFor(() => daemon.fleet.towerAgentId("leaky") !== undefined);
}, 30_000);

afterAll(async () => {
  await daemon?.close();
  await t?.close();
  if (!tmuxTool.skip) spawnSync("tmux", ["-L", SOCKET, "kill-server"]);
  if (home) rmSync(home, { recursive: true, force: true });
});

function fileIncludes(path: string, text: string): boolean {
  try {
    return readFileSync(path, "utf8").includes(text);
  } catch {
    return false; // not written yet
  }
}

async function fleetEvents() {
  return (await t.tower.deps.store.listEvents({ afterId: 0, limit: 10_000 })).filter(
    (e) => e.agentId === daemon.fleet.towerAgentId("leaky"),
  );
}

describe("fleet redaction", () => {
  it("a profile agent's signal run that prints a fetched secret publishes [redacted:NAME]", async () => {
    const sent = await jsonRpcCall<{ deliveredVia: string }>(daemon.sockets.mgmt, "agent.signal", {
      target: "leaky",
      prompt: PRINT_SECRET,
    });
    expect(sent.deliveredVia).toBe("one_shot_run");
    let finished: Awaited<ReturnType<typeof fleetEvents>>[number] | undefined;
    await waitFor(
      async () => (finished = (await fleetEvents()).find((e) => e.name === "agent.signal.finished")) !== undefined,
    );
    expect(finished!.status, JSON.stringify(finished!.payload)).toBe("succeeded");
    expect(finished!.payload.output).toContain("password is [redacted:DB_PASSWORD]");
    await waitFor(async () => (await fleetEvents()).some((e) => e.type === "progress"));
    const progress = (await fleetEvents()).filter((e) => e.type === "progress").map((e) => e.payload.text);
    expect(progress).toContain("password is [redacted:DB_PASSWORD]");
    // the value itself is in no event at all
    const everything = JSON.stringify(await t.tower.deps.store.listEvents({ afterId: 0, limit: 10_000 }));
    expect(everything).not.toContain(VALUE);
  });

  it.skipIf(tmuxTool.skip)(
    "a tmux-hosted agent that prints a fetched secret on its terminal: the pane log on disk has [redacted:NAME]",
    async () => {
      await waitFor(() => daemon.fleet.towerAgentId("paney") !== undefined, 15_000);
      const logs = join(home, "epd", "logs");
      await waitFor(() => readdirSync(logs).includes("paney.pane.fifo"), 10_000);
      // send-keys: the command line itself holds no secret; the value only appears in its output
      await jsonRpcCall(daemon.sockets.mgmt, "agent.signal", { target: "paney", prompt: PRINT_SECRET });
      const paneLog = join(logs, "paney.pane.log");
      await waitFor(() => fileIncludes(paneLog, "password is [redacted:DB_PASSWORD]"), 15_000);
      const capture = spawnSync("tmux", ["-L", SOCKET, "capture-pane", "-p", "-t", "=paney:"], {
        encoding: "utf8",
      }).stdout;
      expect(capture).toContain(`password is ${VALUE}`); // the terminal itself shows it (the agent printed it)
      expect(statSync(paneLog).mode & 0o777).toBe(0o600);
      // no file anywhere in the daemon's home holds the value
      const files = (dir: string): string[] =>
        readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
          e.isDirectory() ? files(join(dir, e.name)) : e.isFile() ? [join(dir, e.name)] : [],
        );
      for (const f of files(home)) expect(readFileSync(f).includes(Buffer.from(VALUE)), f).toBe(false);

      // a cron bash job that prints a value the broker holds (the pane agent fetched it): its fire
      // history on disk has [redacted:NAME]
      const outside = mkdtempSync(join(tmpdir(), "ep-fleet-redaction-src-"));
      try {
        writeFileSync(join(outside, "leak.txt"), `cron saw ${VALUE}\n`);
        writeFileSync(
          join(home, "epd", "cron.toml"),
          `[[job]]\nname = "leak"\nkind = "heartbeat"\ninterval = "1s"\ndispatch ` +
            `= "bash"\nprompt = "cat '${join(outside, "leak.txt")}'"\n`,
        );
        await jsonRpcCall(daemon.sockets.mgmt, "cron.reload", {});
        const state = join(home, "epd", "cron-state.json");
        await waitFor(() => fileIncludes(state, "cron saw [redacted:DB_PASSWORD]"), 15_000);
        expect(readFileSync(state).includes(Buffer.from(VALUE))).toBe(false);
      } finally {
        rmSync(outside, { recursive: true, force: true });
      }
    },
  );

  it.skipIf(tmuxTool.skip)(
    "a pane re-adopted by a restarted epd keeps its secrets session: it still reads secrets, and they stay redacted",
    async () => {
      const paneLog = join(home, "epd", "logs", "paney.pane.log");
      const count = () => (readFileSync(paneLog, "utf8").match(/password is \[redacted:DB_PASSWORD\]/g) ?? []).length;
      const before = count();
      expect(before).toBeGreaterThan(0);
      const pid = spawnSync("tmux", ["-L", SOCKET, "display-message", "-p", "-t", "=paney:", "#{pane_pid}"], {
        encoding: "utf8",
      }).stdout.trim();
      await daemon.close();
      daemon = await createDaemon(daemonOptions);
      await daemon.start();
      await waitFor(() => daemon.fleet.towerAgentId("paney") !== undefined, 15_000);
      // the same pane (adopted, not started again)
      expect(
        spawnSync("tmux", ["-L", SOCKET, "display-message", "-p", "-t", "=paney:", "#{pane_pid}"], {
          encoding: "utf8",
        }).stdout.trim(),
      ).toBe(pid);
      await jsonRpcCall(daemon.sockets.mgmt, "agent.signal", { target: "paney", prompt: PRINT_SECRET });
      await waitFor(() => count() > before, 15_000);
      expect(readFileSync(paneLog, "utf8")).not.toContain("password is undefined");
      expect(readFileSync(paneLog).includes(Buffer.from(VALUE))).toBe(false);
    },
  );
});
