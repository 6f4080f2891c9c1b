// The tools folder's face: the tool catalog, the executor and the ToolService behind /mcp/call,
// /mcp and Connect. The rest of the folder is its own; other folders import only this (docs/architecture.md).
export {
  describeAjvError,
  EVENT_TYPES,
  findTool,
  RUNTIMES,
  summarizeToolCall,
  TASK_STATUSES,
  type Tool,
  TOOLS,
  validateToolArgs,
} from "./catalog.js";
export { createToolExecutor, type ToolExecutor, withSessionDefaults } from "./executor.js";
export { createToolService, type ToolScope, type ToolService } from "./tool-service.js";
