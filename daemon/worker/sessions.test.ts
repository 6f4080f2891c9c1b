import { describe, expect, it } from "vitest";
import { SESSION_ID, createSessionTable } from "./sessions.js";

describe("secrets sessions", () => {
  const info = { taskId: "profile:p", agentId: "agt_1", domainId: "dom_1" };

  it("opens fresh random ids, and re-opens a given one (a re-adopted agent's) once", () => {
    const t = createSessionTable(() => 5);
    const a = t.open(info);
    expect(a.id).toMatch(SESSION_ID);
    expect(t.open(info).id).not.toBe(a.id);
    t.end(a.id);
    const again = t.open(info, { id: a.id });
    expect(again).toEqual({ ...info, id: a.id, startedAt: 5 });
    expect(t.get(a.id)).toBe(again);
    expect(() => t.open(info, { id: a.id })).toThrow(/is open already/);
  });

  it("refuses an id that is not a session id", () => {
    const t = createSessionTable();
    expect(() => t.open(info, { id: "ses_short" })).toThrow(/not a session id/);
    expect(() => t.open(info, { id: "../etc/passwd" })).toThrow(/not a session id/);
    expect(t.list()).toEqual([]);
  });
});
