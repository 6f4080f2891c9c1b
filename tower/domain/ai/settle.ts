// A planned turn settled: read tools run at once and come back as view_specs (their failures as
// notes); write tools become pending actions, described in words, that change nothing until a
// person approves one; an action bar offers the decisions.
import type { JsonObject } from "@bufbuild/protobuf";
import type { Clock } from "../../../common/clock.js";
import { iso } from "../../../common/clock.js";
import { toEpError } from "../../../common/errors.js";
import { newId } from "../../../common/ids.js";
import type { AiActionRow } from "../../store/ai-store.js";
import type { Store } from "../../store/store.js";
import type { Caller } from "../caller.js";
import { findTool, validateToolArgs, withSessionDefaults, type ToolExecutor } from "../tools/index.js";
import { describeAction, storeNames } from "./describe.js";
import type { PlanResult } from "./planner.js";
import { small } from "./session-messages.js";
import type { AiSettings } from "./types.js";
import { actionBarFor, toViewSpecs, type ViewSpec } from "./view-spec.js";

export interface SettleDeps {
  store: Store;
  clock: Clock;
  executor: ToolExecutor;
  settings: AiSettings;
}

export async function settlePlan(d: SettleDeps, caller: Caller, sessionId: string, plan: PlanResult, turnId: string) {
  const { store, clock, executor, settings } = d;
  const toolCalls: JsonObject[] = [];
  const viewSpecs: ViewSpec[] = [...(plan.viewSpecs ?? [])];
  const actions: AiActionRow[] = [];
  const notes: string[] = [];
  const names = storeNames(store);
  for (const call of plan.toolCalls) {
    const tool = findTool(call.tool);
    if (!tool) continue;
    if (tool.kind === "read") {
      const args =
        call.tool === "list_pending_actions" && !call.arguments.session_id
          ? { ...call.arguments, session_id: sessionId }
          : call.arguments;
      try {
        const result = await executor.run(caller, call.tool, args);
        viewSpecs.push(...toViewSpecs(call.tool, result));
        toolCalls.push({
          tool: call.tool,
          kind: "read",
          arguments: args as JsonObject,
          result: small(result) as JsonObject,
        });
      } catch (err) {
        const ep = toEpError(err);
        notes.push(`Could not ${call.tool.replace(/_/g, " ").replace(/ mesh /, " ")}: ${ep.message}`);
        toolCalls.push({
          tool: call.tool,
          kind: "read",
          arguments: args as JsonObject,
          error: ep.message,
          code: ep.code,
        });
      }
      continue;
    }
    const args = validateToolArgs(tool, withSessionDefaults(call.tool, call.arguments, settings));
    const ts = iso(clock.now());
    const action: AiActionRow = {
      id: newId("act", clock.now()),
      sessionId,
      turnId,
      tool: call.tool,
      arguments: args,
      summary: await describeAction(call.tool, args, names),
      status: "pending",
      result: null,
      error: "",
      decidedBy: "",
      decidedAt: "",
      executedAt: "",
      createdAt: ts,
    };
    actions.push(action);
    toolCalls.push({ tool: call.tool, kind: "write", arguments: args as JsonObject, action_id: action.id });
  }
  const bar = actionBarFor(actions.map((a) => a.id));
  if (bar) viewSpecs.push(bar);
  return { toolCalls, viewSpecs, actions, notes };
}
