// `ep task submit --wait` against a real tower and epd (shell runtime), through a TCP proxy that
// counts the CLI's requests and can hold back or refuse its event stream: the wait follows the
// task's events (no polling), catches an end that came before its stream was subscribed, falls
// back to reading the task when the stream fails, and keeps its exit codes (0 succeeded, 1 not).
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { statusWord } from "../test-support/words.js";
import { assertBuilt, ep } from "./cli-helpers.js";
import {
  adminClient,
  registerNode,
  spawnEpd,
  spawnTowerProcess,
  type EpdProcess,
  type TowerProcess,
} from "./epd-harness.js";
import { tempHome, waitFor } from "./harness.js";
import { tcpProxy } from "./tcp-proxy.js";

const home = tempHome("ep-cli-wait-");
let tower: TowerProcess;
let epd: EpdProcess;
let proxy: Awaited<ReturnType<typeof tcpProxy>>;
let missionId = "";
let work: ReturnType<typeof adminClient<typeof WorkService>>;

/** What the proxy does with a connection that opens the event stream. */
let streamMode: "pass" | "hold" | "refuse" | "drop" = "pass";
let releaseHeld: () => void = () => {};
let heldStreams = 0;
let dropStream: (() => void) | undefined;
/**
 * The requests the CLI made through the proxy, by request line (`GET /events/stream…`,
 * `POST /ep.tower.v1.WorkService/GetTask`).
 */
let requests: string[] = [];

beforeAll(async () => {
  assertBuilt();
  tower = await spawnTowerProcess(home.dir);
  const nodeFile = join(home.dir, "node.json");
  await registerNode(tower.url, tower.adminToken, nodeFile);
  epd = await spawnEpd({ home: home.dir, nodeFile, backendUrl: tower.url });
  work = adminClient(tower, WorkService);
  const domainId = (await work.createDomain({ name: "wait" })).domain!.id;
  missionId = (await work.createMission({ domainId, title: "wait" })).mission!.id;
  await epd.call("agent.enroll", { domainId, runtime: "shell", name: "waiter" });
  proxy = await tcpProxy(Number(new URL(tower.url).port), ({ client, upstream }) => {
    let first = true;
    client.on("data", (d: Buffer) => {
      const text = d.toString("latin1");
      for (const m of text.matchAll(/^(GET|POST) (\S+) HTTP\/1\.1\r$/gm)) {
        requests.push(`${m[1]} ${m[2]}`);
        if (m[2].endsWith("/GetTask") && dropStream) {
          dropStream();
          dropStream = undefined;
        }
      }
      if (first && text.startsWith("GET /events/stream")) {
        first = false;
        if (streamMode === "refuse") return client.destroy();
        // the stream breaks once the CLI has had its headers (it reads the task after them)
        if (streamMode === "drop") dropStream = () => client.destroy();
        if (streamMode === "hold") {
          heldStreams++;
          client.pause();
          const go = releaseHeld;
          releaseHeld = () => {
            go();
            upstream.write(d);
            client.resume();
          };
          return;
        }
      }
      first = false;
      upstream.write(d);
    });
    upstream.pipe(client);
  });
}, 60_000);

afterAll(async () => {
  await proxy?.close();
  await epd?.stop();
  await tower?.stop();
  home.cleanup();
});

const submit = (args: string[]) => {
  requests = [];
  return ep(["task", "submit", "--mission", missionId, ...args, "--wait"], {
    env: { EP_HOME: home.dir, EP_BASE_URL: proxy.url, EP_TOKEN: tower.adminToken },
    timeoutMs: 30_000,
  });
};
const calls = (line: string) => requests.filter((r) => r.startsWith(line)).length;

describe("ep task submit --wait", () => {
  it("follows the task's events: the output and exit 0 once " +
    "it succeeded, without reading the task while it runs", async () => {
    streamMode = "pass";
    const r = await submit(["slow echo", "--command", "sleep 1.5; echo waited-out"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^submitted task tsk_\w+; waiting for it to end/);
    expect(r.stdout).toMatch(/task tsk_\w+ succeeded after 1 attempt\(s\) on waiter\nwaited-out\n$/);
    expect(r.stderr).toBe("");
    expect(calls("GET /events/stream?type=matrix&task_id=tsk_")).toBe(1);
    // one read after subscribing, one for the result: polling every 250 ms would read it about 6 times
    expect(calls("POST /ep.tower.v1.WorkService/GetTask")).toBe(2);
  }, 40_000);

  it("a failed task: exit 1 with its error; --json prints the task as it ended", async () => {
    streamMode = "pass";
    const r = await submit(["fails", "--command", "echo about to fail; exit 3", "--max-attempts", "1"]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toMatch(/task tsk_\w+ failed after 1 attempt\(s\)/);
    expect(r.stdout).toContain("about to fail");
    expect(r.stdout).toMatch(/error: .*3/);
    const j = await submit(["json", "--command", "echo as-json", "--json"]);
    expect(j.code, j.stderr).toBe(0);
    expect(j.json().task).toMatchObject({ status: "succeeded", result: { output: "as-json\n", exit_code: 0 } });
  }, 40_000);

  it("a task that ended before the stream was subscribed " +
    "still returns (the read after subscribing sees it)", async () => {
    streamMode = "hold";
    heldStreams = 0;
    let released!: () => void;
    const wasReleased = new Promise<void>((r) => (released = r));
    releaseHeld = released;
    const pending = submit(["quick", "--command", "echo before-the-stream"]);
    // the stream's request waits in the proxy until the task has ended in the tower
    await waitFor(() => heldStreams === 1, 15_000);
    const id = /GET \/events\/stream\?type=matrix&task_id=(tsk_\w+)/.exec(requests.join("\n"))![1];
    await waitFor(async () => statusWord((await work.getTask({ taskId: id })).task!.status) === "succeeded", 15_000);
    releaseHeld();
    await wasReleased;
    const r = await pending;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`task ${id} succeeded`);
    expect(r.stdout).toContain("before-the-stream");
  }, 40_000);

  it("a stream that cannot be opened is said on stderr, and the task is read until it ends", async () => {
    streamMode = "refuse";
    const r = await submit(["no stream", "--command", "sleep 0.6; echo polled-out"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^ep: cannot follow the task's events \(.+\); reading the task every 250 ms instead\n$/);
    expect(r.stdout).toContain("polled-out");
    expect(calls("POST /ep.tower.v1.WorkService/GetTask")).toBeGreaterThanOrEqual(2);
    const failed = await submit(["no stream, fails", "--command", "exit 4", "--max-attempts", "1"]);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toMatch(/failed after 1 attempt/);
  }, 40_000);

  it("a stream lost while the task runs is said on stderr, and the task is read until it ends", async () => {
    streamMode = "drop";
    dropStream = undefined;
    const r = await submit(["stream lost", "--command", "sleep 1; echo read-after-loss"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^ep: the event stream was lost \(.+\); reading the task every 250 ms instead\n$/);
    expect(r.stdout).toContain("read-after-loss");
  }, 40_000);
});
