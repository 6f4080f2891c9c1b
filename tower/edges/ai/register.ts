// Assembles the AI console for the tower: planner and settings from the environment (a bad
// value is a startup error naming the variable), the tool executor over the work and fleet
// services, the session service, and their edges (REST + SSE, /mcp/call, /mcp/tools, /mcp,
// and the Connect AiService and ToolService).
import type { ConnectRouter } from "@connectrpc/connect";
import type { FastifyInstance } from "fastify";
import { AiService, ToolService } from "../../../gen/ep/tower/v1/ai_pb.js";
import { createPlanner } from "../../domain/ai/create-planner.js";
import type { Env, Planner } from "../../domain/ai/planner.js";
import { createAiService, type AiService as Ai } from "../../domain/ai/sessions.js";
import { readAiSettings } from "../../domain/ai/settings.js";
import type { Deps } from "../../domain/deps.js";
import type { FleetService } from "../../domain/fleet.js";
import { createToolExecutor, type ToolExecutor } from "../../domain/tools/executor.js";
import type { WorkService } from "../../domain/work.js";
import { bindService } from "../connect/bind.js";
import { registerMcpRoutes } from "../mcp/mcp-routes.js";
import { createToolService } from "../../domain/tools/tool-service.js";
import { registerAiRoutes } from "./ai-routes.js";

export interface AiConsole {
  ai: Ai;
  executor: ToolExecutor;
  planner: Planner;
  /** Binds AiService and ToolService on the tower's Connect router. */
  bind(router: ConnectRouter): void;
}

export function registerAiConsole(app: FastifyInstance, deps: Deps, opts: { work: WorkService; fleet: FleetService; env?: Env }): AiConsole {
  const env = opts.env ?? process.env;
  const planner = createPlanner(env);
  const settings = readAiSettings(env);
  const executor = createToolExecutor({ deps, work: opts.work, fleet: opts.fleet });
  const ai = createAiService(deps, { planner, settings, executor });
  const tools = createToolService(deps, executor);
  registerAiRoutes(app, ai);
  registerMcpRoutes(app, tools);
  deps.log.info("AI console ready", { planner: planner.name, model: planner.model ?? "", runtime_default: settings.centralRuntimeDefault ?? "" });
  return {
    ai,
    executor,
    planner,
    bind(router) {
      bindService(router, AiService, ai, deps.log);
      bindService(router, ToolService, tools, deps.log);
    },
  };
}
