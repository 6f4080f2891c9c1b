// ep events tail against the tower's SSE feed, and the AI/approvals commands' contract.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assertBuilt, ep } from "./cli-helpers.js";
import { startTower, tempHome, type TestTower } from "./harness.js";

let t: TestTower;
let env: Record<string, string>;

beforeAll(async () => {
  assertBuilt();
  t = await startTower();
  env = { EP_HOME: tempHome("ep-cli-events-").dir, EP_BASE_URL: t.url, EP_TOKEN: t.adminToken };
});
afterAll(async () => {
  await t?.close();
});

describe("ep events tail", () => {
  it("prints events as JSON lines from an id on, in order, and resumes after a given id", async () => {
    const d = (await ep(["domain", "create", "ev", "--json"], { env })).json().domain.id;
    await ep(["mission", "create", "--domain", d, "one"], { env });
    await ep(["mission", "create", "--domain", d, "two"], { env });
    const all = await ep(["events", "tail", "--since", "0", "--limit", "3", "--json"], { env });
    expect(all.code, all.stderr).toBe(0);
    const lines = all.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(3);
    const ids = lines.map((e) => e.id);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(lines[0]).toMatchObject({ type: "matrix" });

    const after = await ep(["events", "tail", "--since", String(ids[0]), "--limit", "1", "--json"], { env });
    expect(JSON.parse(after.stdout.trim()).id).toBe(ids[1]);

    // for people: one short line per event, with the names from the payload, no raw JSON
    const human = await ep(["events", "tail", "--since", "0", "--limit", "3", "--type", "matrix"], { env });
    const rows = human.stdout.trim().split("\n");
    expect(rows).toHaveLength(3);
    expect(rows[0]).toMatch(new RegExp(`^\\s*${ids[0]}  \\d\\d:\\d\\d:\\d\\d  matrix\\s+domain.created\\s+"ev"`));
    expect(rows[1]).toMatch(/mission.created\s+"one" → open$/);
    for (const r of rows) {
      expect(r.length).toBeLessThanOrEqual(200);
      expect(r).not.toContain("{");
    }
  });

  it("stops with exit 3 and a hint when the token is refused (no retry loop)", async () => {
    const r = await ep(["events", "tail"], { env: { ...env, EP_TOKEN: "ept_bad" } });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/hint: log in/);
  });
});

describe("approvals and the AI console", () => {
  it(
    "speak AiService: list, chat and an unknown action give the real " +
      "answers; a tower without AiService gets a clear error, not a crash",
    async () => {
      const none = await ep(["approvals", "ls"], { env });
      expect(none.code, none.stderr).toBe(0);
      expect(none.stdout).toBe("(none)\n");
      expect((await ep(["approvals", "ls", "--json"], { env })).json()).toEqual({ approvals: [], actions: [] });

      const chat = await ep(["ai", "chat", "list domains"], { env });
      expect(chat.code, chat.stderr).toBe(0);
      expect(chat.stdout).toMatch(/^Here are the domains\.\n· list_domains\n/);

      const missing = await ep(["approvals", "approve", "ses_1", "act_1"], { env });
      expect(missing.code).toBe(4);
      expect(missing.stderr).toMatch(/^ep: AI session ses_1 does not exist/);
      expect(missing.stderr).not.toMatch(/at .*\.js:\d+/);
      // one argument is an agent's permission request
      const noApproval = await ep(["approvals", "reject", "apr_missing", "--reason", "no"], { env });
      expect(noApproval.code).toBe(4);
      expect(noApproval.stderr).toMatch(/^ep: approval apr_missing does not exist/);
      const tooMany = await ep(["approvals", "approve", "a", "b", "c"], { env });
      expect(tooMany.code).toBe(2);
      expect(tooMany.stderr).toMatch(
        /usage: ep approvals approve <approval> \[--option <id>\] \| \[<session>\] <action>/,
      );

      // something that is not (yet) a tower with AiService: every route is a 404
      const server = createServer((_req, res) => res.writeHead(404, { "content-type": "text/plain" }).end("Not Found"));
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      try {
        const old = { ...env, EP_BASE_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
        for (const args of [
          ["approvals", "ls"],
          ["ai", "chat", "list domains"],
          ["approvals", "approve", "ses_1", "act_1"],
        ]) {
          const r = await ep(args, { env: old });
          expect(r.code, args.join(" ")).toBe(4);
          expect(r.stderr).toMatch(
            new RegExp(
              `^ep: the tower at \\S+ does not serve 'ep ${args.slice(0, 2).join(" ")}' ` +
                `yet \\(HTTP 404\\)\\nhint: upgrade the tower`,
            ),
          );
          expect(r.stderr).not.toMatch(/at .*\.js:\d+/);
        }
        const asJson = await ep(["approvals", "ls", "--json"], { env: old });
        expect(asJson.json()).toMatchObject({ error: { code: "route_not_found" } });
      } finally {
        await new Promise((r) => server.close(r));
      }
    },
  );
});
