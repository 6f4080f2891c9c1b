// Issue 39, point 4: EP is no OAuth resource, so every /.well-known/ document it does not serve is
// a 404 without a credential (a 401 there made MCP clients believe they must run OAuth), and the
// MCP Inspector CLI (a stock MCP client, pinned in tests/integrators) reports a bad token as EP's
// refusal.
import { execFile } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { integratorTool } from "./integrator-tools.js";
import { startTower, tempHome, type TestTower } from "./harness.js";

const inspector = integratorTool("@modelcontextprotocol/inspector", "clients/launcher/build/index.js", "mcp-inspector");

let t: TestTower;
let home: { dir: string; cleanup(): void };
beforeAll(async () => {
  t = await startTower();
  home = tempHome("ep-inspector-");
});
afterAll(async () => {
  await t?.close();
  home?.cleanup();
});

describe("/.well-known/ on a tower that is no OAuth resource", () => {
  it(
    "answers the OAuth and OpenID discovery documents " + "404 without a credential, and still serves the JWKS",
    async () => {
      for (const path of [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
      ]) {
        const res = await t.api("GET", path, undefined, null);
        expect({ path, status: res.status, code: res.body?.error?.code }).toEqual({
          path,
          status: 404,
          code: "route_not_found",
        });
        expect(res.headers.get("www-authenticate")).toBeNull();
      }
      expect((await t.api("GET", "/.well-known/jwks.json", undefined, null)).status).toBe(200);
      // the door itself still wants the token
      expect((await t.api("POST", "/mcp", { jsonrpc: "2.0", id: 1, method: "tools/list" }, "ept_bad")).status).toBe(
        401,
      );
    },
  );
});

/** The Inspector CLI against the tower's /mcp with `token`; its exit code and output. */
function inspect(token: string, extra: string[] = []): Promise<{ code: number; out: string }> {
  const args = [
    inspector.require(),
    "--cli",
    `${t.url}/mcp`,
    "--transport",
    "http",
    "--header",
    `Authorization: Bearer ${token}`,
    "--method",
    "tools/list",
    ...extra,
  ];
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      args,
      { env: { ...process.env, HOME: home.dir, MCP_INSPECTOR_SECRET_STORE: "memory" }, timeout: 60_000 },
      (err, stdout, stderr) => {
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr });
      },
    );
  });
}

describe.skipIf(inspector.skip)("the MCP Inspector CLI against /mcp", () => {
  it("lists the tools with a good token", async () => {
    const ok = await inspect(t.adminToken);
    expect(ok.code, ok.out).toBe(0);
    expect(ok.out).toContain('"name": "list_domains"');
  }, 90_000);

  it("with a bad token exits with EP's refusal in its output, not an OAuth flow", async () => {
    // --stored-auth-only: the Inspector's mode for scripts and CI (no browser, no prompt)
    const refused = await inspect("ept_not_a_token", ["--stored-auth-only"]);
    expect(refused.code).toBe(3);
    const { error } = JSON.parse(refused.out.slice(refused.out.indexOf('{"error"'))) as {
      error: { code: string; message: string };
    };
    // the body of the tower's 401, as the Inspector got it from POST /mcp
    const body = JSON.parse(error.message.slice(error.message.indexOf("{"))) as {
      error: { code: string; message: string };
    };
    expect(body.error).toMatchObject({ code: "unauthenticated", message: "the token is not known to this tower" });
    expect(refused.out).not.toMatch(/TTY|oauth-protected-resource|authorization server/i);
  }, 90_000);
});
