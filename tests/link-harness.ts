// Node link streams held as epd holds them (NodeService.Link over Connect, HTTP/1.1), for tests
// that watch what the tower sends to nodes: wake-ups (task_ready) and pushed tasks (task).
import type { JsonObject } from "@bufbuild/protobuf";
import { NodeService, type LinkResponse } from "../gen/ep/tower/v1/fleet_pb.js";
import { afterAll, beforeAll } from "vitest";
import { startTower, waitFor, type TestTower } from "./harness.js";

export interface LinkedNode {
  nodeId: string;
  token: string;
  got: LinkResponse[];
  /** task ids this node was woken for (coalesced wake-ups counted one by one) */
  woken(): string[];
  /** the tasks pushed to it, claimed and started (kind "task") */
  pushed(): LinkResponse[];
  close(): Promise<void>;
}

/** Registers a node and holds its link until `close` (also pushed on `closers`); resolves after hello. */
export async function linkNode(t: TestTower, closers: (() => Promise<void>)[], hostname: string, opts: { takeTasks?: boolean } = {}): Promise<LinkedNode> {
  const reg = await t.client(NodeService).registerNode({ hostname });
  const ac = new AbortController();
  const got: LinkResponse[] = [];
  const done = (async () => {
    try {
      for await (const m of t.client(NodeService, reg.token).link({ attachSecret: "s".repeat(32), version: "test", takeTasks: opts.takeTasks ?? false }, { signal: ac.signal })) got.push(m);
    } catch {
      // aborted
    }
  })();
  const close = () => (ac.abort(), done);
  closers.push(close);
  await waitFor(() => got.some((m) => m.kind === "hello"));
  const woken = () =>
    got
      .filter((m) => m.kind === "task_ready")
      .flatMap((m) => (Array.isArray(m.data?.tasks) ? (m.data.tasks as JsonObject[]).map((x) => String(x.task_id)) : [m.taskId]));
  return { nodeId: reg.node!.id, token: reg.token, got, woken, pushed: () => got.filter((m) => m.kind === "task"), close };
}

/**
 * One tower for the test file (started before its tests, closed after them, the links first) and a
 * linkNode bound to it. Call at the top level of the file.
 */
export function useLinkTower(): { tower(): TestTower; linkNode(hostname: string, opts?: { takeTasks?: boolean }): Promise<LinkedNode> } {
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
