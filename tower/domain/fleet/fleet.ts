// Nodes, agents and the node link: the one outbound stream from each epd over which the tower
// hands work and sends commands (cancel, signal, supervise, attach). The parts: fleet/nodes.ts,
// fleet/agents.ts, fleet/links.ts (links, routing, relays), fleet/wake.ts (who can take work), fleet/push.ts (handing
// it over).
import type { Auth } from "../auth/index.js";
import type { Deps } from "../deps.js";
import { createWakeIndex } from "./wake.js";
import type { FleetContext } from "./context.js";
import type { FleetOptions } from "./options.js";
import { createLinkHub, type LinkStream } from "./links.js";
import { createNodeOps } from "./nodes.js";
import { createAgentOps } from "./agents.js";

export type { LinkStream };

export { createWakeIndex };

export type FleetService = ReturnType<typeof createFleetService>;

export function createFleetService(deps: Deps, auth: Auth, opts: FleetOptions) {
  // the node links this replica holds, routing and targeted wake-ups (fleet/links.ts)
  const linkHub = createLinkHub(deps, opts, {
    nodeCaller: (nodeId) => auth.nodeCaller(nodeId),
    cachedNodeCaller: (nodeId) => auth.cachedNodeCaller(nodeId),
  });
  const ctx: FleetContext = { deps, auth, opts, linkHub };
  return {
    close: linkHub.close,
    /** Whether this replica holds the node's link (linkedAnywhere: any replica). */
    isLinked: linkHub.isLinked,
    linkedCount: linkHub.linkedCount,
    /** The linked nodes a queued task in this domain would wake (tests, bench). */
    wakeTargets: linkHub.wakeTargets,
    attachSecretOf: linkHub.attachSecretOf,
    /** Pushes a command on a link this replica holds; false otherwise (deliver: any replica). */
    send: linkHub.send,
    deliver: linkHub.deliver,
    linkedAnywhere: linkHub.linkedAnywhere,
    link: linkHub.link,
    session: linkHub.session,
    ...createNodeOps(ctx),
    ...createAgentOps(ctx),
  };
}
