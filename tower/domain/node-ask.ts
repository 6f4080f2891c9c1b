// A question to one node over its link, answered by an event the node publishes: config_reload
// (config.reload), merge (workspace.merged | workspace.merge_refused). The answer names the
// request; the tower listens before sending, since it can come back before the send returns.
import type { LinkCommand } from "./fleet/types.js";
import { EpError } from "../../common/errors.js";
import type { EventRow } from "../store/store.js";
import type { Deps } from "./deps.js";

export type Deliver = (nodeId: string, msg: LinkCommand) => Promise<boolean>;

export interface NodeQuestion {
  nodeId: string;
  msg: Parameters<Deliver>[1];
  /** the event that answers it */
  answers: (e: EventRow) => boolean;
  waitMs: number;
  /** what the node did not do when it is not connected (node_offline's message) */
  undone: string;
  /** after the command left, before waiting (a "requested" event) */
  sent?: () => Promise<void>;
}

/** Sends the command to the node and waits up to waitMs for its answer; undefined when none came. */
export async function askNode(deps: Deps, deliver: Deliver, q: NodeQuestion): Promise<EventRow | undefined> {
  const { clock } = deps;
  let settle: ((e: EventRow | undefined) => void) | undefined;
  const answered = new Promise<EventRow | undefined>((r) => (settle = r));
  const unsubscribe = deps.hub.subscribe((events: readonly EventRow[]) => {
    const e = events.find(q.answers);
    if (e) settle?.(e);
  });
  const timer = q.waitMs > 0 ? clock.setTimeout(() => settle?.(undefined), q.waitMs) : undefined;
  try {
    if (!(await deliver(q.nodeId, q.msg)))
      throw new EpError("node_offline", `node ${q.nodeId} is not connected; ${q.undone}`, { node_id: q.nodeId });
    await q.sent?.();
    return q.waitMs > 0 ? await answered : undefined;
  } finally {
    unsubscribe();
    if (timer) clock.clearTimeout(timer);
  }
}
