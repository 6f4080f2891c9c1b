// Issue 15: the real agent CLIs from npm run through a real tower and epd against a fake LLM API
// (tests/real-cli-harness.ts): replies, usage, EP's tools for claude, API errors, and
// permission = "ask" for claude -p and claude-code-acp.
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApprovalService, ApprovalStatus } from "../gen/ep/tower/v1/approvals_pb.js";
import { ep } from "./cli-helpers.js";
import { openSse } from "./events-helpers.js";
import { waitFor } from "./harness.js";
import { skipRealCli as skip, startRealCli, type RealCli } from "./real-cli-harness.js";

let cli: RealCli;
beforeAll(async () => {
  if (!skip) cli = await startRealCli("ep-real-cli-");
}, 120_000);
afterAll(async () => cli?.close());

const cliEnv = () => cli.cliEnv();
const runTask = (runtime: string, prompt: string, onCreated?: (id: string) => Promise<void>) =>
  cli.runTask(runtime, prompt, { onCreated });

describe.skipIf(skip)("the real agent CLIs through epd", () => {
  it("claude (vendorA_code): the fixture's reply is the output; usage and cost reach ep task get", async () => {
    const r = await runTask("vendorA_code", "ep-real-cli: reply hello");
    expect(r.status, r.error + cli.epd.stderr().slice(-2000)).toBe("succeeded");
    expect(r.output).toBe("hello from the fixture");
    const got = await ep(["task", "get", r.id, "--json"], { env: cliEnv() });
    const usage = got.json().task.result.usage;
    expect(usage).toMatchObject({ input_tokens: "1200", output_tokens: "34" });
    expect(usage.cost_usd).toBeGreaterThan(0);
    expect(usage.model).not.toBe("");
  }, 120_000);

  it("codex (vendorB) and gemini (vendorC) succeed with the fixture's reply", async () => {
    const [codex, gemini] = await Promise.all([
      runTask("vendorB", "ep-real-cli: reply hello"),
      runTask("vendorC", "ep-real-cli: reply hello"),
    ]);
    expect(codex.status, codex.error).toBe("succeeded");
    expect(codex.output).toBe("hello from the fixture");
    expect(gemini.status, gemini.error).toBe("succeeded");
    expect(gemini.output).toBe("hello from the fixture");
  }, 120_000);

  it("claude calls EP's MCP tool list_domains on its first, immediate reply", async () => {
    const r = await runTask("vendorA_code", "ep-real-cli: list the domains");
    expect(r.status, r.error).toBe("succeeded");
    expect(r.output).toBe("the tool saw real-cli-domain");
  }, 120_000);

  it("claude's API error is the task's error, without the 'success' subtype", async () => {
    const r = await runTask("vendorA_code", "ep-real-cli: provoke an api error");
    expect(r.status).toBe("failed");
    expect(r.error).toMatch(/^vendorA_code: /);
    expect(r.error).toContain("the fixture refuses this request");
    expect(r.error).not.toContain("success");
  }, 120_000);

  it("claude-code-acp (vendorA_agent_acp) answers with the fixture's reply", async () => {
    const r = await runTask("vendorA_agent_acp", "ep-real-cli: reply hello");
    expect(r.status, r.error + cli.epd.stderr().slice(-2000)).toBe("succeeded");
    expect(r.output).toContain("hello from the fixture");
  }, 120_000);

  it("an ACP agent's API error carries the agent's own message", async () => {
    const r = await runTask("vendorA_agent_acp", "ep-real-cli: provoke an api error");
    expect(r.status).toBe("failed");
    expect(r.error).toMatch(/^vendorA_agent_acp: /);
    expect(r.error).toContain("the fixture refuses this request");
  }, 120_000);

  it("the mission's usage is the sum of its tasks', split by agent", async () => {
    const tasks = (await cli.work.listTasks({ missionId: cli.missionId, limit: 1000 })).tasks;
    const usages = tasks.map((t) => t.result?.usage).filter((u) => u !== undefined);
    expect(usages.length).toBeGreaterThanOrEqual(4); // claude twice, codex, gemini at least
    const mission = (await ep(["mission", "get", cli.missionId, "--json"], { env: cliEnv() })).json();
    const sum = (f: (u: (typeof usages)[number]) => number) => usages.reduce((a, u) => a + f(u), 0);
    expect(Number(mission.usage.input_tokens)).toBe(sum((u) => Number(u.inputTokens)));
    expect(Number(mission.usage.output_tokens)).toBe(sum((u) => Number(u.outputTokens)));
    expect(mission.usage.cost_usd).toBeCloseTo(
      sum((u) => u.costUsd),
      6,
    );
    expect(mission.usage.cost_usd).toBeGreaterThan(0);
    const byAgent = mission.usage_by_agent as { usage: { input_tokens: string } }[];
    expect(byAgent.reduce((a, x) => a + Number(x.usage.input_tokens), 0)).toBe(Number(mission.usage.input_tokens));
  }, 120_000);

  it("gemini --acp (vendorA_agent_acp) answers with the fixture's reply", async () => {
    await cli.setRuntimes("gemini");
    const r = await runTask("vendorA_agent_acp", "ep-real-cli: reply hello");
    expect(r.status, r.error + cli.epd.stderr().slice(-2000)).toBe("succeeded");
    expect(r.output).toContain("hello from the fixture");
  }, 120_000);

  it('permission = "ask": claude-code-acp\'s Bash call waits for a ' +
    "person; approving runs it, rejecting and a timeout go on without it", async () => {
    await cli.setRuntimes("claude-code-acp", { acpSettings: 'permission = "ask"\npermission_timeout_seconds = 5\n' });
    const sse = await openSse(`${cli.tower.url}/events/stream?type=approval`, {
      authorization: `Bearer ${cli.tower.adminToken}`,
    });
    try {
      /** the pending request for task `id`, as `ep approvals ls --json` shows it */
      const pendingFor = async (id: string) => {
        let found: Record<string, any> | undefined;
        await waitFor(
          async () => {
            const ls = await ep(["approvals", "ls", "--json"], { env: cliEnv() });
            found = (ls.json().approvals as Record<string, any>[]).find((a) => a.task_id === id);
            return found !== undefined;
          },
          60_000,
          200,
        ).catch(async (err: Error) => {
          const t = (await cli.work.getTask({ taskId: id })).task!;
          throw new Error(
            `${err.message}: no approval for task ${id} (${t.status}: ${t.result?.error ?? ""} ` +
              `${t.result?.output ?? ""}); epd: ${cli.epd.stderr().slice(-3000)}`,
          );
        });
        return found!;
      };
      const decide = (args: string[]) => async (id: string) => {
        const a = await pendingFor(id);
        expect(a).toMatchObject({
          kind: "permission",
          tool: "Bash",
          status: "pending",
          arguments: { command: "touch ep-marker && echo ep-tool-output-42" },
        });
        const r = await ep(["approvals", ...args.slice(0, 1), a.id, ...args.slice(1)], { env: cliEnv() });
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout).toMatch(new RegExp(`^approval ${a.id} ${args[0] === "approve" ? "approved" : "rejected"}`));
      };
      const approved = await runTask("vendorA_agent_acp", "ep-real-cli: ask to run a tool", decide(["approve"]));
      expect(approved.status, approved.error + cli.epd.stderr().slice(-2000)).toBe("succeeded");
      expect(approved.output).toContain("the tool ran");

      // claude-code-acp answers a refusal by ending its turn (deny with interrupt): the run ends
      // without the tool, and without asking the model again
      const rejected = await runTask(
        "vendorA_agent_acp",
        "ep-real-cli: ask to run a tool",
        decide(["reject", "--reason", "not today"]),
      );
      expect(rejected.status, rejected.error).toBe("succeeded");
      expect(rejected.output).not.toContain("the tool ran");

      // nobody decides: after permission_timeout_seconds the tower expires the request, the agent hears no
      let expiredId = "";
      const timedOut = await runTask(
        "vendorA_agent_acp",
        "ep-real-cli: ask to run a tool",
        async (id) => void (expiredId = (await pendingFor(id)).id),
      );
      expect(timedOut.status, timedOut.error).toBe("succeeded");
      expect(timedOut.output).not.toContain("the tool ran");
      const shown = await ep(["approvals", "ls", "--json"], { env: cliEnv() });
      expect(shown.json().approvals).toEqual([]);

      // every request and decision was on the stream, in order
      await waitFor(() => sse.messages.filter((m) => m.data.includes("permission.decided")).length >= 3, 10_000);
      const events = sse.messages.map((m) => JSON.parse(m.data)).filter((e) => e.name?.startsWith("permission."));
      expect(events.map((e) => `${e.name}:${e.status}`)).toEqual([
        "permission.requested:pending",
        "permission.decided:approved",
        "permission.requested:pending",
        "permission.decided:rejected",
        "permission.requested:pending",
        "permission.decided:expired",
      ]);
      expect(events.at(-1).payload.approval_id).toBe(expiredId);
    } finally {
      sse.close();
    }
  }, 180_000);

  it('permission = "ask" for claude -p (vendorA_code): its permission prompt tool ' +
    "asks a person; approving runs the tool, rejecting makes claude go on without it", async () => {
    await cli.setRuntimes("claude-code-acp", {
      extra: '[vendorA_code]\npermission = "ask"\npermission_timeout_seconds = 5\n',
    });
    const decide = (args: string[]) => async (id: string) => {
      let found: Record<string, any> | undefined;
      await waitFor(
        async () => {
          found = (
            (await ep(["approvals", "ls", "--json"], { env: cliEnv() })).json().approvals as Record<string, any>[]
          ).find((a) => a.task_id === id);
          return found !== undefined;
        },
        60_000,
        200,
      ).catch(async (err: Error) => {
        const t = (await cli.work.getTask({ taskId: id })).task!;
        throw new Error(
          `${err.message}: no approval for task ${id} (${t.status}: ${t.result?.error ?? ""} ` +
            `${t.result?.output ?? ""}); epd: ${cli.epd.stderr().slice(-3000)}`,
        );
      });
      expect(found).toMatchObject({
        kind: "permission",
        tool: "Bash",
        status: "pending",
        arguments: { command: "touch ep-marker && echo ep-tool-output-42" },
      });
      expect(found!.options.map((o: { kind: string }) => o.kind)).toEqual([
        "allow_once",
        "allow_always",
        "reject_once",
      ]);
      const r = await ep(["approvals", ...args.slice(0, 1), found!.id, ...args.slice(1)], { env: cliEnv() });
      expect(r.code, r.stderr).toBe(0);
    };
    const approved = await runTask("vendorA_code", "ep-real-cli: ask to run a tool", decide(["approve"]));
    expect(approved.status, approved.error + cli.epd.stderr().slice(-2000)).toBe("succeeded");
    expect(approved.output).toBe("the tool ran");
    const rejected = await runTask(
      "vendorA_code",
      "ep-real-cli: ask to run a tool",
      decide(["reject", "--reason", "not today"]),
    );
    expect(rejected.status, rejected.error).toBe("succeeded");
    expect(rejected.output).toBe("the tool did not run");
    // nobody decides: after permission_timeout_seconds the request expires and claude hears no
    const timedOut = await runTask("vendorA_code", "ep-real-cli: ask to run a tool");
    expect(timedOut.status, timedOut.error).toBe("succeeded");
    expect(timedOut.output).toBe("the tool did not run");
    const transport = createConnectTransport({
      baseUrl: cli.tower.url,
      httpVersion: "1.1",
      interceptors: [(next) => (req) => (req.header.set("authorization", `Bearer ${cli.tower.adminToken}`), next(req))],
    });
    const asked = (await createClient(ApprovalService, transport).listApprovals({ taskId: timedOut.id })).approvals;
    expect(asked.map((a) => [a.status, a.reason])).toEqual([
      [ApprovalStatus.EXPIRED, "nobody decided before the timeout"],
    ]);
  }, 180_000);
});
