// The work API: domains, missions, Kanban tasks (kind=assigned) and claimable tasks with
// leases (kind=claimable). Plain functions over the store; every edge calls these. The catalog
// (work/catalog.ts) and the claim loop (work/claims.ts) share one context (work/context.ts).
import type { Deps } from "../deps.js";
import { createWorkCatalog } from "./catalog.js";
import { createTaskCatalog } from "./tasks.js";
import { createTaskControls } from "./control.js";
import { createWorkClaims } from "./claims.js";
import { createWorkContext } from "./context.js";
import { createWorkPush } from "./push.js";
import { createWorkPipelines } from "./pipelines.js";

export {
  CLAIM_POLICIES,
  CLAIMABLE_STATES,
  KANBAN_STATES,
  RUNTIMES,
  sumUsage,
  usageByAgent,
  WORK_CACHE_MS,
} from "./support.js";

export type WorkService = ReturnType<typeof createWorkService>;

export function createWorkService(deps: Deps) {
  const ctx = createWorkContext(deps);
  return {
    ...createWorkCatalog(ctx),
    ...createTaskCatalog(ctx),
    ...createWorkClaims(ctx),
    ...createTaskControls(ctx),
    ...createWorkPush(ctx),
    ...createWorkPipelines(ctx),
  };
}
