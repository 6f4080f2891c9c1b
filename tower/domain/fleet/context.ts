// What the fleet's node and agent operations share (fleet.ts builds it).
import type { Auth } from "../auth/index.js";
import type { Deps } from "../deps.js";
import type { createLinkHub } from "./links.js";
import type { FleetOptions } from "./options.js";

/** What the node and agent operations share. */
export interface FleetContext {
  deps: Deps;
  auth: Auth;
  opts: FleetOptions;
  linkHub: ReturnType<typeof createLinkHub>;
}
