// The hub with a real tmux pane (private socket) and real WebSockets on loopback, time from a
// FakeClock: idle viewers are closed, a pane's tmux client lingers for a reconnect then detaches,
// bad control frames are answered without closing, and a read-only viewer cannot type.
import { execFileSync } from "node:child_process";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { FakeClock } from "../../test-support/fake-clock.js";
import { waitFor } from "../../test-support/wait.js";
import { silentLogger } from "../../common/log.js";
import { createAttachHub, type AttachHub, type AttachTarget, type ViewerOptions } from "./attach-hub.js";
import { parseClientFrame } from "./frames.js";
import { optionalTool } from "../../tests/optional-tools.js";

const tmuxTool = optionalTool("tmux", { pkg: "tmux", suite: "attach hub" });

const SOCKET = `ep-hub-test-${process.pid}`;
const tmux = (...args: string[]) => execFileSync("tmux", ["-L", SOCKET, ...args], { encoding: "utf8" });
let wss: WebSocketServer;
let port: number;
let serveNext: ((ws: WebSocket) => void) | undefined;

beforeAll(async () => {
  if (tmuxTool.skip) return;
  tmuxTool.require();
  tmux("new-session", "-d", "-s", "pane", "-x", "80", "-y", "24", "--", "bash", "--norc", "--noprofile");
  wss = new WebSocketServer({ port: 0, host: "127.0.0.1" });
  await new Promise((r) => wss.once("listening", r));
  port = (wss.address() as AddressInfo).port;
  wss.on("connection", (ws) => serveNext?.(ws));
});

afterAll(async () => {
  if (wss) await new Promise((r) => wss.close(r));
  try {
    tmux("kill-server");
  } catch {
    // already gone
  }
});

/** A client socket whose server end the hub serves. */
async function viewer(hub: AttachHub, target: AttachTarget, opts: ViewerOptions) {
  const frames: Record<string, any>[] = [];
  let output = "";
  const served = new Promise<void>((r) => (serveNext = (ws) => void hub.attach(ws, target, opts).then(() => r())));
  const ws = new WebSocket(`ws://127.0.0.1:${port}`);
  ws.on("message", (d: Buffer, bin) => (bin ? (output += d.toString()) : frames.push(JSON.parse(d.toString()))));
  const closed = new Promise<number>((r) => ws.on("close", (code) => r(code)));
  await new Promise((r) => ws.once("open", r));
  await served;
  return { ws, frames, output: () => output, closed };
}

const until = (cond: () => boolean, ms = 5000) => waitFor(cond, ms, 10);

const pane: AttachTarget = { kind: "tmux", agentId: "agt_x", session: "pane", socketName: SOCKET };

describe.skipIf(tmuxTool.skip)("attach hub", () => {
  it("closes a viewer after the idle timeout and detaches the pane after the linger", async () => {
    const clock = new FakeClock(0);
    const hub = createAttachHub({ clock, log: silentLogger, idleMs: 60_000, lingerMs: 30_000 });
    const v = await viewer(hub, pane, { mode: "rw", cols: 80, rows: 24 });
    await until(() => v.frames.some((f) => f.type === "hello"));
    expect(hub.stats()).toEqual([expect.objectContaining({ key: `tmux:${SOCKET}:pane`, viewers: 1 })]);
    const clients = () => tmux("list-clients", "-F", "#{client_tty}").split("\n").filter(Boolean).length;
    expect(clients()).toBe(1);
    clock.advance(30_000);
    expect(v.ws.readyState).toBe(v.ws.OPEN); // half the idle time
    clock.advance(30_001);
    expect(await v.closed).toBe(4000);
    expect(v.frames.at(-1)).toMatchObject({ type: "error", code: "idle_timeout" });
    // no viewer: the tmux client lingers, then detaches; the pane keeps running
    expect(hub.stats()[0].viewers).toBe(0);
    clock.advance(30_001);
    await until(() => clients() === 0);
    expect(hub.stats()).toEqual([]);
    expect(tmux("list-sessions", "-F", "#{session_name}")).toContain("pane");
    await hub.close();
  }, 20_000);

  it("answers a bad control frame, drops a read-only viewer's keystrokes, and ends viewers on close", async () => {
    const clock = new FakeClock(0);
    const hub = createAttachHub({ clock, log: silentLogger });
    const ro = await viewer(hub, pane, { mode: "ro", cols: 80, rows: 24 });
    await until(() => ro.frames.some((f) => f.type === "hello"));
    ro.ws.send("{nope");
    ro.ws.send(JSON.stringify({ type: "resize", cols: 0, rows: 5 }));
    await until(() => ro.frames.filter((f) => f.type === "error").length === 2);
    expect(ro.frames.filter((f) => f.type === "error").map((f) => f.code)).toEqual([
      "invalid_json",
      "invalid_argument",
    ]);
    ro.ws.send(Buffer.from("echo ro-typed\r"));
    const rw = await viewer(hub, pane, { mode: "rw", cols: 80, rows: 24 });
    rw.ws.send(Buffer.from("echo rw-typed-$((1+1))\r"));
    await until(() => ro.output().includes("rw-typed-2"));
    expect(tmux("capture-pane", "-p", "-t", "=pane:")).not.toContain("ro-typed");
    await hub.close();
    expect(await ro.closed).toBe(1001);
    expect(await rw.closed).toBe(1001);
  }, 20_000);

  it("refuses a pane that is not running", async () => {
    const hub = createAttachHub({ clock: new FakeClock(0), log: silentLogger });
    const v = await viewer(hub, { ...pane, session: "missing" }, { mode: "rw", cols: 80, rows: 24 });
    expect(await v.closed).toBe(4004);
    expect(v.frames[0]).toMatchObject({ type: "error", code: "not_found" });
    await hub.close();
  });
});

describe("control frames", () => {
  it("accepts resize with sizes in range and names the bad field", () => {
    expect(parseClientFrame('{"type":"resize","cols":120,"rows":40}')).toEqual({ type: "resize", cols: 120, rows: 40 });
    expect(() => parseClientFrame('{"type":"resize","cols":120}')).toThrow(/rows is required/);
    expect(() => parseClientFrame('{"type":"resize","cols":1001,"rows":4}')).toThrow(/cols must be an integer/);
    expect(() => parseClientFrame('{"type":"input"}')).toThrow(/unknown control frame/);
  });
});
