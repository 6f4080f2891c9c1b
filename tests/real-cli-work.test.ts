// Issue 34: with EP's defaults (keys and base URLs only), every agent runtime does real work in
// its workspace and nowhere else, and is offered EP's tools. Real CLIs (claude, codex, gemini,
// claude-code-acp, gemini --acp), a real tower and epd, the fake LLM API (real-cli-harness.ts).
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DenialSource } from "../gen/ep/tower/v1/resources_pb.js";
import { skipRealCli, startRealCli, toolNames, type AcpAgent, type RealCli } from "./real-cli-harness.js";

let cli: RealCli;
beforeAll(async () => {
  if (!skipRealCli) cli = await startRealCli("ep-real-work-");
}, 120_000);
afterAll(async () => cli?.close());

/**
 * Each agent: its runtime, the ACP agent behind vendorA_agent_acp, and the name its CLI gives EP's list_domains tool.
 */
const AGENTS: { who: string; runtime: string; acp: AcpAgent; listDomains: string }[] = [
  { who: "claude", runtime: "vendorA_code", acp: "claude-code-acp", listDomains: "mcp__ep__list_domains" },
  { who: "codex", runtime: "vendorB", acp: "claude-code-acp", listDomains: "mcp__ep.list_domains" },
  { who: "gemini", runtime: "vendorC", acp: "claude-code-acp", listDomains: "mcp_ep_list_domains" },
  { who: "acp-claude", runtime: "vendorA_agent_acp", acp: "claude-code-acp", listDomains: "mcp__ep__list_domains" },
  { who: "acp-gemini", runtime: "vendorA_agent_acp", acp: "gemini", listDomains: "mcp_ep_list_domains" },
];

/** What says a write was refused: the sandbox's error, or a CLI's own refusal. */
const REFUSED = /Read-only file system|needs approval|denied|not allowed|refused|not found/i;

describe.skipIf(skipRealCli).each(AGENTS)("$who with EP's defaults", ({ who, runtime, acp, listDomains }) => {
  it("its own shell tool writes a file in a git worktree, which the task's " +
    "diff shows; a write to the user's home does not land and the task says so", async () => {
    await cli.setRuntimes(acp);
    const repo = cli.repo();
    const r = await cli.runTask(runtime, `ep-real-cli: ${who} writes hello.txt`, { input: { workspace: { repo } } });
    const frames = (await cli.frames(r.id)).join("\n");
    expect(r.status, `${r.error}\n${frames.slice(-3000)}`).toBe("succeeded");
    expect(r.output).toContain("wrote it");
    const ws = (await cli.work.getTask({ taskId: r.id })).task!.result!.workspace!;
    expect(ws.patch, frames.slice(-3000)).toContain("+++ b/hello.txt");
    expect(ws.patch).toContain("+hi");
    expect(existsSync(join(cli.userHome, `outside-${who}.txt`))).toBe(false);
    expect(frames).toMatch(REFUSED);
    // and the result says what the agent could not do: the write the confinement refused
    const denials = (await cli.work.getTask({ taskId: r.id })).task!.result!.denials;
    expect(denials, frames.slice(-3000)).toContainEqual(
      expect.objectContaining({ source: DenialSource.SANDBOX, tried: expect.stringContaining(`outside-${who}.txt`) }),
    );
  }, 120_000);

  it("is offered EP's tools (the fake API's journal) and one call works in the task's domain", async () => {
    await cli.setRuntimes(acp);
    const before = (await cli.journal()).length;
    const prompt = who === "claude" ? "ep-real-cli: list the domains" : `ep-real-cli: ${who} lists the domains`;
    const r = await cli.runTask(runtime, prompt);
    expect(r.status, r.error).toBe("succeeded");
    expect(r.output).toContain("the tool saw real-cli-domain");
    // offered: in a request's tools, or named among the tools claude defers (its ToolSearch)
    const requests = (await cli.journal()).slice(before);
    const offered = requests.some(
      (e) => toolNames(e.body).includes(listDomains) || JSON.stringify(e.body).includes(`\\n${listDomains}\\n`),
    );
    expect(offered, requests.map((e) => toolNames(e.body).join(",")).join("\n")).toBe(true);
  }, 120_000);

  it('permission = "read-only" makes the write fail', async () => {
    const table =
      runtime === "vendorA_agent_acp"
        ? { acpSettings: 'permission = "read-only"\n' }
        : { extra: `[${runtime}]\npermission = "read-only"\n` };
    await cli.setRuntimes(acp, table);
    const repo = cli.repo();
    const r = await cli.runTask(runtime, `ep-real-cli: ${who} writes hello.txt`, { input: { workspace: { repo } } });
    const frames = (await cli.frames(r.id)).join("\n");
    const ws = (await cli.work.getTask({ taskId: r.id })).task!.result?.workspace;
    expect(ws?.patch ?? "", frames.slice(-3000)).not.toContain("hello.txt");
    expect(frames).toMatch(REFUSED);
    await cli.setRuntimes(acp);
  }, 120_000);
});
