import { describe, expect, it } from "vitest";
import type { EventRow } from "../store/store.js";
import { createEventHub } from "./event-hub.js";

const row = (id: number): EventRow => ({
  id,
  type: "matrix",
  name: "x",
  domainId: "",
  missionId: "",
  agentId: "",
  taskId: "",
  sessionId: "",
  status: "",
  payload: {},
  createdAt: "2026-11-26T00:00:00Z",
});

describe("the event hub", () => {
  it("a listener that throws is reported, and the others still get every event once", () => {
    const errors: unknown[] = [];
    const hub = createEventHub({ onListenerError: (err) => errors.push(err) });
    const got: number[] = [];
    hub.subscribe(() => {
      throw new Error("listener bug");
    });
    hub.subscribe((events) => got.push(...events.map((e) => e.id)));
    hub.publish([row(1), row(2)]);
    hub.publish([row(2), row(3)]); // 2 again: dropped
    expect(got).toEqual([1, 2, 3]);
    expect(errors.map((e) => (e as Error).message)).toEqual(["listener bug", "listener bug"]);
  });
});
