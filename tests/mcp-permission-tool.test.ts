// epd mcp's permission_prompt tool against a real in-process tower: each prompt is an approval
// for the run's task; the answer is claude's JSON; "allow <tool> for this task" is remembered for
// the rest of the run, other tools are asked again.
import { describe, expect, it } from "vitest";
import { silentLogger } from "../common/log.js";
import { systemClock } from "../common/clock.js";
import { ApprovalService, ApprovalStatus, PermissionOptionKind } from "../gen/ep/tower/v1/approvals_pb.js";
import { AgentService, NodeService } from "../gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { startTower } from "./harness.js";
import { waitFor } from "../test-support/wait.js";
import { createTowerClients } from "../daemon/link/tower-client.js";
import { createPermissionTool } from "../daemon/mcp/permission-tool.js";
import { Runtime } from "../gen/ep/tower/v1/resources_pb.js";

describe("permission_prompt", () => {
  it("asks a person per call, remembers 'allow for this task' per tool, and denies with the reason", async () => {
    const t = await startTower();
    try {
      const work = t.client(WorkService);
      const domainId = (await work.createDomain({ name: "prompt" })).domain!.id;
      const missionId = (await work.createMission({ domainId, title: "m" })).mission!.id;
      const node = await t.client(NodeService).registerNode({ hostname: "n", domainIds: [domainId] });
      const agentId = (
        await t
          .client(AgentService, node.token)
          .enrollAgent({ domainId, runtime: Runtime.VENDORA_CODE, name: "claude" })
      ).agent!.id;
      await work.createTask({ missionId, title: "t", runtime: Runtime.VENDORA_CODE, input: { prompt: "x" } });
      const taskId = (await t.client(WorkService, node.token).claimTask({ agentId })).task!.id;
      const tool = createPermissionTool({
        tower: createTowerClients(t.url, node.token),
        clock: systemClock,
        log: silentLogger,
        taskId,
        agentId,
        timeoutMs: 60_000,
      });
      const approvals = t.client(ApprovalService);
      const signal = new AbortController().signal;
      const decideNext = async (how: "always" | "reject") => {
        let id = "";
        await waitFor(
          async () =>
            (id = (await approvals.listApprovals({ status: ApprovalStatus.PENDING })).approvals[0]?.id ?? "") !== "",
          5000,
        );
        if (how === "always") await approvals.approve({ approvalId: id, optionId: "allow_always" });
        else await approvals.reject({ approvalId: id, reason: "not here" });
        return id;
      };
      const text = (r: { content: unknown[] }) => JSON.parse((r.content[0] as { text: string }).text);

      const first = tool({ tool_name: "Bash", input: { command: "touch /repo/x" }, tool_use_id: "tu1" }, signal);
      const asked = await decideNext("always");
      expect(text(await first)).toEqual({ behavior: "allow", updatedInput: { command: "touch /repo/x" } });
      const a = (await approvals.getApproval({ approvalId: asked })).approval!;
      expect(a).toMatchObject({ tool: "Bash", title: "touch /repo/x", taskId, agentId, paths: ["/repo/x"] });
      expect(a.options.map((o) => o.kind)).toEqual([
        PermissionOptionKind.ALLOW_ONCE,
        PermissionOptionKind.ALLOW_ALWAYS,
        PermissionOptionKind.REJECT_ONCE,
      ]);

      // Bash again: remembered, no new approval
      expect(text(await tool({ tool_name: "Bash", input: { command: "ls" } }, signal))).toEqual({
        behavior: "allow",
        updatedInput: { command: "ls" },
      });
      expect((await approvals.listApprovals({})).approvals).toHaveLength(1);

      // another tool is asked again; a rejection is a deny with the reason
      const edit = tool({ tool_name: "Write", input: { file_path: "/repo/y", content: "z" } }, signal);
      await decideNext("reject");
      expect(text(await edit)).toEqual({
        behavior: "deny",
        message: "a person did not allow this (rejected by bootstrap-admin: not here)",
      });
    } finally {
      await t.close();
    }
  });
});
