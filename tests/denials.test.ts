// A task says what its agent could not do (issue 34): a real tower and a real epd run a vendorA_code
// task whose agent process replays what the real claude 2.1.330 printed when its permission rules
// refused a Bash write (daemon/runtimes/fixtures/claude "[refused]"; the lines were recorded
// against llmock). What is under test is EP's path: parser → epd's outcome → the tower's result →
// ep task get, watch and submit --wait.
import type { Client } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EventService } from "../gen/ep/tower/v1/events_pb.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { statusWord } from "../test-support/words.js";
import { assertBuilt, ep } from "./cli-helpers.js";
import { adminClient, startTowerAndEpd, type EpdProcess, type TowerProcess } from "./epd-harness.js";
import { tempHome, waitFor } from "./harness.js";

const home = tempHome("ep-denials-");
let tower: TowerProcess;
let epd: EpdProcess;
let work: Client<typeof WorkService>;
let missionId = "";
const env = () => ({ EP_HOME: home.dir, EP_BASE_URL: tower.url, EP_TOKEN: tower.adminToken, NO_COLOR: "1" });
const refused = {
  tool: "Bash",
  tried: "echo hi > /root/den-hello.txt",
  reason: expect.stringMatching(/^Output redirection to '\/root\/den-hello.txt' needs approval/),
  source: "policy",
  call_id: "toolu_ORSKsrhpsD9vY5ls",
};

beforeAll(async () => {
  assertBuilt();
  ({ tower, epd } = await startTowerAndEpd(home.dir));
  work = adminClient(tower, WorkService);
  const domainId = (await work.createDomain({ name: "denials" })).domain!.id;
  missionId = (await work.createMission({ domainId, title: "refused" })).mission!.id;
  await epd.call("agent.enroll", { domainId, runtime: "vendorA_code", name: "refused-agent" });
}, 60_000);

afterAll(async () => {
  await epd?.stop();
  await tower?.stop();
  home.cleanup();
});

async function runRefused(title: string): Promise<string> {
  const id = (
    await work.createTask({
      missionId,
      title,
      runtime: Runtime.VENDORA_CODE,
      input: { prompt: "[refused] write hello.txt" },
      maxAttempts: 1,
    })
  ).task!.id;
  await waitFor(
    async () => ["succeeded", "failed"].includes(statusWord((await work.getTask({ taskId: id })).task!.status)),
    20_000,
  );
  return id;
}

describe("a run whose agent was refused a tool", () => {
  it("keeps the status it earned, with the refusal in result.denials " +
    "(ep task get --json) and its count in task.succeeded", async () => {
    const id = await runRefused("write hello");
    const got = await ep(["task", "get", id, "--json"], { env: env() });
    expect(got.code, got.stderr).toBe(0);
    const task = got.json().task;
    expect(task.status).toBe("succeeded");
    expect(task.result.output).toBe("claude done");
    expect(task.result.denials).toEqual([refused]);
    const ended = (
      await adminClient(tower, EventService).listEvents({ limit: 100, filter: { taskId: id } })
    ).events.find((e) => e.name === "task.succeeded")!;
    expect(ended.payload).toMatchObject({ denials: 1 });

    // for people: the status says it, and the refusal is listed
    const text = await ep(["task", "get", id], { env: env() });
    expect(text.stdout).toMatch(/status\s+succeeded — 1 tool call refused/);
    expect(text.stdout).toMatch(/refused:\n\s+policy\s+Bash echo hi > \/root\/den-hello.txt: Output redirection/);
  }, 60_000);

  it("ep task watch prints the refusal as a frame and ends with the count; the exit code stays 0", async () => {
    const id = await runRefused("watch hello");
    const watched = await ep(["task", "watch", id], { env: env() });
    expect(watched.code, watched.stderr).toBe(0);
    expect(watched.stdout).toContain("  ⚠ refused (policy): Bash echo hi > /root/den-hello.txt: Output redirection");
    expect(watched.stderr.trimEnd().split("\n").at(-1)).toMatch(/^succeeded — 1 tool call refused/);
  }, 60_000);

  it("ep task submit --wait says it on stderr and exits 0 for a succeeded run", async () => {
    const r = await ep(
      [
        "task",
        "submit",
        "--mission",
        missionId,
        "submitted hello",
        "--runtime",
        "vendorA_code",
        "--prompt",
        "[refused] write hello.txt",
        "--max-attempts",
        "1",
        "--wait",
      ],
      {
        env: env(),
        timeoutMs: 30_000,
      },
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/succeeded after 1 attempt/);
    const warned = new RegExp(
      String.raw`warning: task tsk_\S+ succeeded — 1 tool call refused\n` +
        String.raw`\s+policy\s+Bash echo hi > \/root\/den-hello.txt: Output redirection`,
    );
    expect(r.stderr).toMatch(warned);
  }, 60_000);
});
