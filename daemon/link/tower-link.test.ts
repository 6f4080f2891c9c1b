// The link and the daemon's own claims (the recovery path while the link is down): a claim in
// flight when a link opens must be in the open's agents, or the tower, squaring its view with them,
// gives the claimed task back as lost and hands it to another agent while it runs here (the
// session-crash test found eight tasks run twice that way). The tower's side of the stream is a
// stand-in here: what is checked is the order the daemon keeps, not the tower.
import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { silentLogger } from "../../common/log.js";
import {
  LinkResponseSchema,
  type LinkResponse,
  type NodeService,
  type SessionRequest,
} from "../../gen/ep/tower/v1/fleet_pb.js";
import { FakeClock } from "../../test-support/fake-clock.js";
import { waitFor } from "../../test-support/wait.js";
import { createTowerLink } from "./tower-link.js";

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** A session that answers hello to its open and then stays up until aborted; the opens it was sent. */
function standInSessions() {
  const opens: SessionRequest[] = [];
  const client = {
    session(requests: AsyncIterable<SessionRequest>, { signal }: { signal: AbortSignal }): AsyncIterable<LinkResponse> {
      return (async function* () {
        const it = requests[Symbol.asyncIterator]();
        opens.push((await it.next()).value as SessionRequest);
        yield create(LinkResponseSchema, { command: { case: "hello", value: { nodeId: "node_1" } } });
        await new Promise<void>((r) => signal.addEventListener("abort", () => r(), { once: true }));
      })();
    },
  };
  return { opens, client: client as unknown as Client<typeof NodeService> };
}

describe("the link and work done without it", () => {
  it(
    "an open waits for a claim in flight and names the lease " +
      "it brought; no claim starts while the link opens or is up",
    async () => {
      const { opens, client } = standInSessions();
      let leases: string[] = [];
      const link = createTowerLink({
        nodes: client,
        sessions: client,
        clock: new FakeClock(),
        log: silentLogger,
        attachSecret: "s",
        version: "test",
        agents: () => [{ agentId: "agt_1", leaseIds: leases, idle: leases.length === 0 }],
        onMessage: () => {},
      });
      const claim = deferred();
      expect(
        link.offLink(() => claim.promise.then(() => void (leases = ["ls_claimed"]))),
        "a claim while no link is up",
      ).toBe(true);
      link.start();
      // the link waits: an open sent now would not name the lease the claim is about to bring
      await new Promise((r) => setImmediate(r));
      expect(opens, "opens sent while the claim is in flight").toHaveLength(0);
      expect(
        link.offLink(async () => {}),
        "a second claim while the link opens",
      ).toBe(false);
      claim.resolve();
      await waitFor(() => link.state() === "connected", 2_000, 1);
      expect(
        opens.map((o) => (o.message.case === "open" ? o.message.value.agents.map((a) => a.leaseIds) : "not an open")),
      ).toEqual([[["ls_claimed"]]]);
      expect(
        link.offLink(async () => {}),
        "a claim while the link is up",
      ).toBe(false);
      await link.close();
    },
  );

  it("work done without the link that fails is logged and does not hold the next open", async () => {
    const { opens, client } = standInSessions();
    const warned: string[] = [];
    const link = createTowerLink({
      nodes: client,
      sessions: client,
      clock: new FakeClock(),
      log: { ...silentLogger, warn: (msg: string) => void warned.push(msg) },
      attachSecret: "s",
      version: "test",
      agents: () => [],
      onMessage: () => {},
    });
    expect(link.offLink(() => Promise.reject(new Error("tower away")))).toBe(true);
    link.start();
    await waitFor(() => link.state() === "connected", 2_000, 1);
    expect(opens).toHaveLength(1);
    expect(warned).toContain("work without the link failed");
    await link.close();
  });
});
