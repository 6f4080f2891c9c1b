// Node link streams held as epd holds them (NodeService.Link over Connect, HTTP/1.1), for tests
// that watch what the tower sends to nodes: task assignments (the one way work reaches a node)
// and commands.
import type { MessageInitShape } from "@bufbuild/protobuf";
import {
  NodeService,
  type LinkAgentSchema,
  type LinkResponse,
  type TaskAssignment,
} from "../gen/ep/tower/v1/fleet_pb.js";
import { afterAll, beforeAll } from "vitest";
import { startTower, waitFor, type TestTower } from "./harness.js";

export interface LinkedNode {
  nodeId: string;
  token: string;
  got: LinkResponse[];
  /** the tasks handed to it, claimed and started for one of its agents */
  assigned(): TaskAssignment[];
  close(): Promise<void>;
}

export interface LinkOptions {
  /** the node's agents as its daemon would report them when the link opens */
  agents?: MessageInitShape<typeof LinkAgentSchema>[];
  /** an already registered node (its token) instead of a new one */
  token?: string;
  nodeId?: string;
}

/**
 * Holds a node's link until `close` (also pushed on `closers`); registers the node unless given; resolves after hello.
 */
export async function linkNode(
  t: TestTower,
  closers: (() => Promise<void>)[],
  hostname: string,
  opts: LinkOptions = {},
): Promise<LinkedNode> {
  const reg = opts.token
    ? { token: opts.token, nodeId: opts.nodeId! }
    : await t
        .client(NodeService)
        .registerNode({ hostname })
        .then((r) => ({ token: r.token, nodeId: r.node!.id }));
  const ac = new AbortController();
  const got: LinkResponse[] = [];
  const done = (async () => {
    try {
      for await (const m of t
        .client(NodeService, reg.token)
        .link({ attachSecret: "s".repeat(32), version: "test", agents: opts.agents ?? [] }, { signal: ac.signal }))
        got.push(m);
    } catch {
      // aborted
    }
  })();
  const close = () => (ac.abort(), done);
  closers.push(close);
  await waitFor(() => got.some((m) => m.command.case === "hello"));
  const assigned = () => got.flatMap((m) => (m.command.case === "assign" ? [m.command.value] : []));
  return { nodeId: reg.nodeId, token: reg.token, got, assigned, close };
}

/**
 * One tower for the test file (started before its tests, closed after them, the links first) and a
 * linkNode bound to it. Call at the top level of the file.
 */
export function useLinkTower(): {
  tower(): TestTower;
  linkNode(hostname: string, opts?: LinkOptions): Promise<LinkedNode>;
} {
  let t: TestTower | undefined;
  const closers: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    t = await startTower();
  });
  afterAll(async () => {
    for (const c of closers) await c();
    await t?.close();
  });
  return { tower: () => t!, linkNode: (hostname, opts) => linkNode(t!, closers, hostname, opts) };
}
