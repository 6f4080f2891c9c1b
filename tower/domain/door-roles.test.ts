import { describe, expect, it } from "vitest";
import { AiService } from "../../gen/ep/tower/v1/ai_pb.js";
import { ApprovalService } from "../../gen/ep/tower/v1/approvals_pb.js";
import { AuthService } from "../../gen/ep/tower/v1/auth_pb.js";
import { EventService } from "../../gen/ep/tower/v1/events_pb.js";
import { AgentService, NodeService } from "../../gen/ep/tower/v1/fleet_pb.js";
import { SecretService } from "../../gen/ep/tower/v1/secrets_pb.js";
import { ToolService } from "../../gen/ep/tower/v1/tools_pb.js";
import { WorkService } from "../../gen/ep/tower/v1/work_pb.js";
import { WebhookService } from "../../gen/ep/tower/v1/webhooks_pb.js";
import { EpError } from "../../common/errors.js";
import type { Caller } from "./caller.js";
import { authorizeRpc, authorizeTool, RPC_ROLES, TOOL_ROLES } from "./door-roles.js";
import { TOOLS } from "./tools/catalog.js";

const SERVICES = [
  WorkService,
  NodeService,
  AgentService,
  AuthService,
  EventService,
  AiService,
  ToolService,
  SecretService,
  ApprovalService,
  WebhookService,
];
const viewer: Caller = { subject: "tok_v", role: "viewer", via: "token" };

describe("door roles", () => {
  it("lists every RPC of the tower's services and every catalog tool, and nothing else", () => {
    const methods = SERVICES.flatMap((s) => s.methods.map((m) => `${s.name}/${m.name}`)).sort();
    expect(Object.keys(RPC_ROLES).sort()).toEqual(methods);
    expect(Object.keys(TOOL_ROLES).sort()).toEqual(TOOLS.map((t) => t.name).sort());
  });

  it("refuses a role that may never call the door, naming who may", () => {
    expect(() => authorizeRpc(viewer, "WorkService/GetTask")).not.toThrow();
    const err = (() => {
      try {
        authorizeRpc(viewer, "WorkService/CreateTask");
      } catch (e) {
        return e as EpError;
      }
    })();
    expect(err).toBeInstanceOf(EpError);
    expect(err).toMatchObject({
      code: "forbidden",
      message: "role viewer may not call WorkService/CreateTask (admin, operator, node, agent may)",
    });
    expect(() => authorizeTool(viewer, "submit_mesh_task")).toThrow(
      /role viewer may not call the tool submit_mesh_task/,
    );
    expect(() => authorizeTool(viewer, "list_tasks")).not.toThrow();
    // what is not a door of the table is left to its handler (procedure_not_found, tool_not_found)
    expect(() => authorizeRpc(viewer, "WorkService/NoSuchMethod")).not.toThrow();
    expect(() => authorizeTool(viewer, "no_such_tool")).not.toThrow();
  });
});
