// The AI console's face: its sessions (AiService), the planner and the settings. The rest of the
// folder is its own; other folders import only this and types.ts (docs/architecture.md).
export { createPlanner } from "./create-planner.js";
export { type AiService, createAiService } from "./sessions.js";
export { readAiSettings } from "./settings.js";
