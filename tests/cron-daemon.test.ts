// Cron through the built epd: `ep agent cron list|describe|history|reload|gc-now --json`, the
// same over JSON-RPC and the generated Connect client on mgmt.sock; a heartbeat `signal` job goes
// through the one signal path to a profile agent (inbox + matrix events at the tower); a broken
// cron.toml on reload keeps the running jobs and names every error's line; and a restart inside the
// minute of a fire does not fire that slot again.
import { createClient } from "@connectrpc/connect";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createMgmtTransport, jsonRpcCall } from "../daemon/mgmt/client.js";
import { CronService } from "../gen/ep/daemon/v1/mgmt_pb.js";
import type { EpdProcess } from "./epd-harness.js";
import { type FleetSetup, fleetSuite, runEp, startFleetEpd, towerEvents, writeDaemonFile } from "./fleet-harness.js";
import { waitFor } from "./harness.js";

let s: FleetSetup;
let epd: EpdProcess | undefined;

fleetSuite("ep-cron-", { set: (setup) => (s = setup), epd: () => epd });

const ENV = { EP_CRON_TICK_MS: "1000" };

describe("cron in the daemon", () => {
  it("serves ep agent cron … end to end, dispatches signal jobs " +
    "through the signal path, keeps old jobs on a broken reload", async () => {
    writeDaemonFile(s, "agents.toml", `[[agent]]\nid = "sh"\nruntime = "shell"\n`);
    writeDaemonFile(
      s,
      "cron.toml",
      `[[job]]
name = "pulse"
kind = "heartbeat"
interval = "1h"
session = "sh"
prompt = "echo pulse-$((3*3))"

[[job]]
name = "disk"
schedule = "*/15 * * * *"
dispatch = "bash"
prompt = "echo disk-ok"
`,
    );
    epd = await startFleetEpd(s, ENV);
    const ep = (...args: string[]) => runEp(s.home, [...args, "--json"]);

    const list = await ep("agent", "cron", "list");
    expect(list.code, list.stderr).toBe(0);
    const jobs = list.json().jobs as { name: string; next_fire_at: string; dispatch: string; kind: string }[];
    expect(jobs.map((j) => j.name)).toEqual(["pulse", "disk"]);
    expect(jobs[1]).toMatchObject({ dispatch: "bash", kind: "cron", schedule: "*/15 * * * *", missed: "skip" });
    expect(Date.parse(jobs[1].next_fire_at)).toBeGreaterThan(Date.now());
    expect(new Date(jobs[1].next_fire_at).getUTCMinutes() % 15).toBe(0);

    // the heartbeat fired at the first tick: a signal to the shell profile (a one-shot run)
    await waitFor(async () => (await ep("agent", "cron", "history", "pulse")).json().fires.length === 1, 10_000);
    const fire = (await ep("agent", "cron", "history", "pulse")).json().fires[0];
    expect(fire).toMatchObject({ job: "pulse", status: "ok", output: "delivered to sh via one_shot_run" });
    const described = await ep("agent", "cron", "describe", "pulse");
    expect(described.json().job).toMatchObject({
      name: "pulse",
      kind: "heartbeat",
      interval: "1h",
      session: "sh",
      last_fire: { status: "ok" },
    });

    await waitFor(async () => (await towerEvents(s, "matrix", "agent.signal.finished")).length === 1, 10_000);
    const finished = (await towerEvents(s, "matrix", "agent.signal.finished"))[0].payload;
    expect(finished).toMatchObject({ profile: "sh", ok: true });
    expect(finished.output.trim()).toBe("pulse-9");
    expect((await towerEvents(s, "inbox", "agent.signal"))[0].payload).toMatchObject({
      profile: "sh",
      via: "one_shot_run",
      source: "cron",
    });
    await waitFor(async () => (await towerEvents(s, "matrix", "cron.fired")).length >= 1, 10_000);
    expect((await towerEvents(s, "matrix", "cron.fired"))[0]).toMatchObject({
      status: "ok",
      payload: { job: "pulse", status: "ok" },
    });

    // unknown job → exit 4
    const ghost = await ep("agent", "cron", "describe", "ghost");
    expect(ghost.code).toBe(4);

    // gc-now answers a count
    const gc = await ep("agent", "cron", "gc-now");
    expect(gc.code).toBe(0);
    expect(gc.json()).toEqual({ removed: 0 });

    // a broken file: every error with its line, the old jobs keep running
    writeDaemonFile(
      s,
      "cron.toml",
      `[[job]]
name = "pulse"
kind = "heartbeat"
interval = "1h"
session = "sh"
prompt = "echo pulse"

[[job]]
name = "bad"
schedule = "0 25 * * *"
dispatch = "bash"
prompt = "true"
schedual = "oops"
`,
    );
    const reload = await ep("agent", "cron", "reload");
    expect(reload.code).toBe(2);
    expect(reload.stderr).toMatch(/line 10, job "bad", field schedule/);
    expect(reload.stderr).toMatch(/line 13, job "bad", field schedual/);
    expect(reload.stderr).toContain("the running jobs were kept");
    // JSON-RPC carries the errors as data
    const rpcErr = await jsonRpcCall(epd.mgmt, "cron.reload", {}).catch(
      (e: { details?: { errors?: { line: number }[] } }) => e,
    );
    expect((rpcErr as { details: { errors: { line: number }[] } }).details.errors.map((e) => e.line)).toEqual([10, 13]);
    const after = await ep("agent", "cron", "list");
    expect(after.json().jobs.map((j: { name: string }) => j.name)).toEqual(["pulse", "disk"]);
    // and the list says the file has errors (the running jobs are the previous file's)
    expect(after.json().problems.map((p: { level: string; line: number }) => `${p.level} ${p.line}`)).toEqual([
      "error 10",
      "error 13",
    ]);

    // fixed: reload takes it
    writeDaemonFile(
      s,
      "cron.toml",
      `[[job]]\nname = "only"\nschedule = "@daily"\ndispatch = "bash"\nprompt = "true"\n`,
    );
    expect((await ep("agent", "cron", "reload")).json()).toEqual({ jobs: 1 });
    // the generated Connect client sees the same
    const cron = createClient(CronService, createMgmtTransport(epd.mgmt));
    expect((await cron.list({})).jobs.map((j) => j.name)).toEqual(["only"]);
    expect((await cron.history({ name: "pulse", limit: 5 })).fires).toHaveLength(1); // history of a removed job
  }, 90_000);

  it("a restart inside the minute of a fire does not fire that slot again", async () => {
    await epd?.stop();
    const out = join(s.home, "fires.txt");
    // once a minute, at a second a few seconds from now rather than at :00 (up to a minute away);
    // never past :50, so the fire's `date` is still in the slot's minute, which the marker records
    const soon = (new Date().getUTCSeconds() + 5) % 60;
    const second = soon > 50 ? 0 : soon;
    writeDaemonFile(
      s,
      "cron.toml",
      `[[job]]\nname = "every-minute"\nschedule = "${second} * * * * ` +
        `*"\ndispatch = "bash"\nprompt = "date -u +%Y-%m-%dT%H:%M >> '${out}'"\n`,
    );
    epd = await startFleetEpd(s, ENV);
    const lines = () => {
      try {
        return readFileSync(out, "utf8").split("\n").filter(Boolean);
      } catch {
        return [];
      }
    };
    await waitFor(() => lines().length === 1, 70_000, 100);
    const minute = lines()[0];
    const slot = (await runEp(s.home, ["agent", "cron", "history", "every-minute", "--json"])).json().fires[0]
      .slot as string;
    expect(slot.slice(0, 16)).toBe(minute);
    // restart at once, twice, well inside the minute after the slot
    for (let i = 0; i < 2; i++) {
      await epd.stop();
      epd = await startFleetEpd(s, ENV);
    }
    // three more ticks of the last epd (each one is recorded in its cron state): nothing may fire the slot again
    const restartedAt = Date.now();
    const lastTick = () =>
      (JSON.parse(readFileSync(join(s.epdHome, "cron-state.json"), "utf8")) as { lastTickAt?: number }).lastTickAt ?? 0;
    await waitFor(() => lastTick() >= restartedAt + 3 * 1000, 20_000, 100);
    const sameMinute = Date.now() < Date.parse(slot) + 60_000;
    const fired = lines();
    if (sameMinute) expect(fired).toEqual([minute]);
    // the next minute's slot may have fired once, this one never twice
    else expect(fired.filter((l) => l === minute)).toEqual([minute]);
    const history = (await runEp(s.home, ["agent", "cron", "history", "every-minute", "--json"])).json().fires as {
      slot: string;
      status: string;
    }[];
    expect(history.filter((f) => f.slot.startsWith(minute))).toHaveLength(1);
  }, 120_000);
});
