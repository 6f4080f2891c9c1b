// agents.json's enrollments under way: a task handed to an agent whose enrollment answer is not
// read yet waits for it (enrolled()) and then finds the agent, instead of asking the tower.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAgentStore } from "./agent-store.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const record = (id: string) => ({
  id,
  domainId: "dom_1",
  name: id,
  runtime: "shell",
  capabilities: [],
  enrolledAt: "2026-12-02T00:00:00.000Z",
});

describe("enrollments under way", () => {
  it("enrolled() settles once each enrollment under way is recorded or failed, and not before", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ep-agent-store-"));
    dirs.push(dir);
    const store = createAgentStore(dir);
    await store.enrolled(); // none under way
    let answer!: () => void;
    const answered = new Promise<void>((r) => (answer = r));
    const enroll = store.enrolling(answered.then(() => store.add(record("agt_1"))));
    let fail!: (e: Error) => void;
    const refused = store.enrolling(new Promise<void>((_, rej) => (fail = rej)));
    refused.catch(() => undefined);

    let settled = false;
    const waiting = store.enrolled().then(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    answer();
    await enroll;
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false); // the refused one is still under way
    fail(new Error("refused"));
    await waiting;
    expect(store.find("agt_1")?.id).toBe("agt_1");
    // ended ones are forgotten: nothing to wait for now
    await store.enrolled();
  });
});
