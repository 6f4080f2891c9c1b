// Issue 16, points 2 and 3: the CLI always shows the tower's own message (a bad token on a
// Connect call used to print "ep: " with an empty message), and global options work before the
// command as after it. Also the same refusal in the Connect and gRPC-Web protocols.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toEpError } from "../common/errors.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { spawn } from "node:child_process";
import { assertBuilt, ep, EP_BIN } from "./cli-helpers.js";
import { startTower, tempHome, type TestTower } from "./harness.js";

let t: TestTower;
const home = tempHome("ep-cli-errors-");

beforeAll(async () => {
  assertBuilt();
  t = await startTower();
});

afterAll(async () => {
  await t?.close();
  home.cleanup();
});

describe("refusals reach people and clients whole", () => {
  it("a Connect client gets unauthenticated with the tower's message and EP code", async () => {
    const transport = createConnectTransport({
      baseUrl: t.url,
      httpVersion: "1.1",
      interceptors: [(next) => (req) => (req.header.set("authorization", "Bearer bad"), next(req))],
    });
    const err = await createClient(WorkService, transport)
      .listDomains({})
      .catch((e: unknown) => e);
    const e = toEpError(err);
    expect(e.code).toBe("unauthenticated");
    expect(e.message).toBe("the token is not known to this tower");
  });

  it("a gRPC-Web client gets the status in its own protocol", async () => {
    const res = await fetch(`${t.url}/ep.tower.v1.WorkService/ListDomains`, {
      method: "POST",
      headers: { "content-type": "application/grpc-web+proto", authorization: "Bearer bad" },
      body: new Uint8Array([0, 0, 0, 0, 0]),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("grpc-status")).toBe("16");
    expect(decodeURIComponent(res.headers.get("grpc-message") ?? "")).toBe("the token is not known to this tower");
  });

  it("ep prints the tower's message for a bad token, in text and in --json", async () => {
    const env = { EP_HOME: home.dir, EP_BASE_URL: t.url, EP_TOKEN: "bad" };
    const text = await ep(["domain", "ls"], { env });
    expect(text.code).toBe(3);
    expect(text.stderr).toContain("ep: the token is not known to this tower");
    const json = await ep(["domain", "ls", "--json"], { env });
    expect(json.json().error).toMatchObject({
      code: "unauthenticated",
      message: "the token is not known to this tower",
    });
  });

  it("global options work before the command", async () => {
    const env = { EP_HOME: home.dir, EP_BASE_URL: t.url };
    await t.api("POST", "/domains", { name: "global-opts" });
    const before = await ep(["--json", "--token", t.adminToken, "domain", "ls"], { env });
    expect(before.code).toBe(0);
    expect(before.json().domains.map((d: { name: string }) => d.name)).toContain("global-opts");
    const eq = await ep([`--token=${t.adminToken}`, "domain", "ls", "--json"], { env });
    expect(eq.code).toBe(0);
    const url = await ep(["--url", t.url, "--token", t.adminToken, "domain", "ls"], { env: { EP_HOME: home.dir } });
    expect(url.stdout).toContain("global-opts");
    // a group alone prints the group's commands, and points at their help, not at one of them
    const group = await ep(["agent"], { env });
    expect(group.code).toBe(2);
    expect(group.stderr).toContain("Commands under 'ep agent':");
    expect(group.stderr).toContain("Run 'ep agent <command> --help'");
    // a missing argument points at the command's own help
    const missing = await ep(["task", "get"], { env });
    expect(missing.stderr).toContain("hint: usage: ep task get <id>  (see 'ep task get --help')");
    const alone = await ep(["--json"], { env });
    expect(alone.code).toBe(2);
    expect(alone.stderr).toContain("say which command");
  });

  it("names work where ids are taken; an ambiguous name is an error listing the matches", async () => {
    const env = { EP_HOME: home.dir, EP_BASE_URL: t.url, EP_TOKEN: t.adminToken };
    const d = (await t.api("POST", "/domains", { name: "named" })).body.domain.id as string;
    const one = (await t.api("POST", `/domains/${d}/m`, { title: "dup" })).body.mission.id as string;
    const two = (await t.api("POST", `/domains/${d}/m`, { title: "dup" })).body.mission.id as string;
    await t.api("POST", `/domains/${d}/m`, { title: "solo" });
    const byName = await ep(["mission", "ls", "--domain", "named", "--json"], { env });
    expect(byName.code, byName.stderr).toBe(0);
    expect(
      byName
        .json()
        .missions.map((m: { title: string }) => m.title)
        .sort(),
    ).toEqual(["dup", "dup", "solo"]);
    const solo = await ep(["task", "submit", "--mission", "solo", "by name", "--json"], { env });
    expect(solo.code, solo.stderr).toBe(0);
    const amb = await ep(["task", "submit", "--mission", "dup", "x"], { env });
    expect(amb.code).toBe(2);
    expect(amb.stderr).toContain(`mission "dup" is ambiguous: ${one}, ${two}`);
    // --prompt is the agent's prompt (input.prompt), apart from the title
    const prompted = await ep(
      [
        "task",
        "submit",
        "--mission",
        "solo",
        "review",
        "--runtime",
        "vendorA_code",
        "--prompt",
        "review the diff in detail",
        "--json",
      ],
      { env },
    );
    expect(prompted.code, prompted.stderr).toBe(0);
    expect(prompted.json().task.input).toEqual({ prompt: "review the diff in detail" });
    // a shell task without a command is refused when it is made, naming the field
    const noCommand = await ep(["task", "submit", "--mission", "solo", "no command", "--runtime", "shell"], { env });
    expect(noCommand.code).toBe(2);
    expect(noCommand.stderr).toContain("input.command: is required for runtime shell");
    const none = await ep(["mission", "ls", "--domain", "nowhere"], { env });
    expect(none.code).toBe(4);
    expect(none.stderr).toContain("domain nowhere does not exist");
  });
});

describe("a reader that stops reading", () => {
  it("ends ep quietly with its exit code, no stack trace (ep … | head)", async () => {
    assertBuilt();
    const child = spawn(process.execPath, [EP_BIN, "--help"], { stdio: ["ignore", "pipe", "pipe"] });
    child.stdout.destroy(); // the pipe's reader is gone before ep writes
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    expect(stderr).not.toMatch(/EPIPE|Unhandled|at /);
    expect(code).toBe(0);
  });
});
