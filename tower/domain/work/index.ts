// The work folder's face: the WorkService (domains, missions, tasks, claims, pipelines), MergeTask
// and what the fleet shares of it. The rest of the folder is its own; other folders import only this
// and types.ts (docs/architecture.md).
export { AgentNotIdle } from "./context.js";
export { createTaskMerge, type TaskMerge } from "./merge.js";
export { assignment } from "./push.js";
export { text } from "./support.js";
export { createWorkService, RUNTIMES, sumUsage, type WorkService } from "./work.js";
