// permission = "ask": a tool-permission request of the agent becomes a tower approval
// (ApprovalService.RequestPermission) and the run waits on it (WaitApproval long polls) until a
// person decides or its timeout rejects it. The wait survives a tower that is briefly away
// (retried with backoff up to the request's own deadline); a refusal from the tower (the task
// is no longer ours) is a rejection. Progress frames say what the run is waiting for.
import type { Client } from "@connectrpc/connect";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import type { JsonObject } from "@bufbuild/protobuf";
import { backoffDelay } from "../../common/backoff.js";
import type { Clock } from "../../common/clock.js";
import { toEpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";
import {
  ApprovalStatus,
  PermissionOptionKindSchema,
  type ApprovalService,
  type Approval,
  type PermissionOptionKind,
} from "../../gen/ep/tower/v1/approvals_pb.js";
import { enumOf } from "../../common/vocab.js";
import type { PermissionAnswer, PermissionAsk, ProgressFrame } from "../runtimes/runtime.js";
import { refusedByTower } from "./report.js";

const WAIT_MS = 30_000;

export interface AskerDeps {
  approvals: Client<typeof ApprovalService>;
  clock: Clock;
  log: Logger;
  taskId: string;
  agentId: string;
  onFrame(frame: ProgressFrame): void;
}

export function createPermissionAsker(
  d: AskerDeps,
): (ask: PermissionAsk, signal: AbortSignal) => Promise<PermissionAnswer> {
  const sleep = (ms: number, signal: AbortSignal) =>
    new Promise<void>((resolve) => {
      const timer = d.clock.setTimeout(done, ms);
      function done() {
        d.clock.clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      }
      signal.addEventListener("abort", done);
    });

  /** `call` until it answers, the tower refuses, or `deadline` passes (then the last error). */
  async function retrying<T>(call: () => Promise<T>, deadline: number, signal: AbortSignal): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await call();
      } catch (err) {
        if (signal.aborted || refusedByTower(err) || d.clock.now() >= deadline) throw err;
        d.log.debug("approval call failed; retrying", { error: toEpError(err).message });
        await sleep(Math.min(backoffDelay(attempt), Math.max(0, deadline - d.clock.now())), signal);
        if (signal.aborted) throw err;
      }
    }
  }

  return async (ask, signal) => {
    const deadline = d.clock.now() + ask.timeoutMs;
    const asked = await retrying(
      () =>
        d.approvals.requestPermission(
          {
            taskId: d.taskId,
            agentId: d.agentId,
            tool: ask.tool,
            title: ask.title,
            arguments: ask.arguments as JsonObject,
            paths: ask.paths,
            options: ask.options.map((o) => ({
              ...o,
              kind: enumOf<PermissionOptionKind>(PermissionOptionKindSchema, o.kind, "kind"),
            })),
            timeout: durationFromMs(ask.timeoutMs),
          },
          { signal },
        ),
      deadline,
      signal,
    );
    let approval: Approval = asked.approval!;
    d.onFrame({
      kind: "status",
      text:
        `waiting for approval ${approval.id}: ${ask.tool}${ask.title ? ` (${ask.title})` : ""}; ` +
        `decide with 'ep approvals approve ${approval.id}' or 'ep approvals reject ${approval.id}'`,
      data: { approval_id: approval.id, tool: ask.tool, paths: ask.paths },
    });
    // the tower expires the request at its deadline; a little longer here lets it say so
    while (approval.status === ApprovalStatus.PENDING && !signal.aborted) {
      const id = approval.id;
      approval = (
        await retrying(
          () => d.approvals.waitApproval({ approvalId: id, wait: durationFromMs(WAIT_MS) }, { signal }),
          deadline + WAIT_MS,
          signal,
        )
      ).approval!;
    }
    if (signal.aborted) throw new Error("the run stopped while the approval was pending");
    const approved = approval.status === ApprovalStatus.APPROVED;
    const note = approved
      ? `approved by ${approval.decidedBy}`
      : approval.status === ApprovalStatus.EXPIRED
        ? "expired: nobody decided in time"
        : `rejected by ${approval.decidedBy}${approval.reason ? `: ${approval.reason}` : ""}`;
    d.onFrame({
      kind: "status",
      text: `permission for ${ask.tool} ${note}`,
      data: { approval_id: approval.id, approved, option_id: approval.optionId },
    });
    return { approved, optionId: approval.optionId || undefined, approvalId: approval.id, note };
  };
}
