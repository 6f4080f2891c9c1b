// The console's OIDC sign-in doors over plain HTTP, against a real OpenID provider
// (oidc-provider, in this process): what /auth/oidc/start sends the browser off with, every
// malformed or foreign answer at /auth/oidc/callback refused on a page that says why (never a
// session, never a stack trace), a tower without the setting, and a wrong issuer stopping the
// start with the reason.
import { createServer } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeClock } from "../test-support/fake-clock.js";
import { startTestProvider, type TestProvider } from "../test-support/oidc-provider.js";
import { freePort, ROOT, spawnTowerChild, startTower, tempHome, type TestTower } from "./harness.js";

let idp: TestProvider;
let t: TestTower;
let publicUrl: string;
const clock = new FakeClock(Date.now());

const ENV = (issuer: string, url: string) => ({
  EP_PUBLIC_URL: url,
  EP_OIDC_ISSUER: issuer,
  EP_OIDC_CLIENT_ID: "ep-console",
  EP_OIDC_CLIENT_SECRET: "client-secret-for-tests",
  EP_SECRET_KEY: "oidc-inputs-test",
});

beforeAll(async () => {
  const port = await freePort();
  publicUrl = `http://127.0.0.1:${port}`;
  idp = await startTestProvider({
    clientId: "ep-console",
    clientSecret: "client-secret-for-tests",
    redirectUri: `${publicUrl}/auth/oidc/callback`,
    accounts: {},
  });
  t = await startTower({ clock, port, env: ENV(idp.issuer, publicUrl) });
}, 30_000);

afterAll(async () => {
  await t?.close();
  await idp?.close();
});

/** GET /auth/oidc/start: the provider's URL and the flow cookie's value. */
async function start(): Promise<{ location: URL; cookie: string; setCookie: string }> {
  const res = await fetch(`${publicUrl}/auth/oidc/start`, { redirect: "manual" });
  expect(res.status).toBe(302);
  const setCookie = res.headers.get("set-cookie") ?? "";
  return {
    location: new URL(res.headers.get("location")!),
    cookie: /ep_oidc_flow=([^;]*)/.exec(setCookie)![1],
    setCookie,
  };
}

/** GET /auth/oidc/callback?<query> with the flow cookie (if any): status, page, cookies set. */
async function callback(query: string, cookie?: string) {
  const res = await fetch(`${publicUrl}/auth/oidc/callback?${query}`, {
    redirect: "manual",
    headers: cookie === undefined ? {} : { cookie: `ep_oidc_flow=${cookie}` },
  });
  const html = await res.text();
  return {
    status: res.status,
    html,
    type: res.headers.get("content-type"),
    setCookie: res.headers.getSetCookie(),
    reason: /<p id="reason"[^>]*>([^<]*)<\/p>/.exec(html)?.[1] ?? "",
  };
}

describe("the sign-in's start", () => {
  it("GET /auth/oidc tells the login page which provider to offer", async () => {
    const res = await fetch(`${publicUrl}/auth/oidc`);
    expect(await res.json()).toEqual({ enabled: true, provider: "127.0.0.1", start_url: "/auth/oidc/start" });
  });

  it("sends the browser to the provider with PKCE (S256), state, nonce and the public redirect URI", async () => {
    const { location, cookie, setCookie } = await start();
    expect(location.origin + location.pathname).toBe(`${idp.issuer}/auth`);
    const p = location.searchParams;
    expect(
      Object.fromEntries(
        ["client_id", "response_type", "redirect_uri", "code_challenge_method", "scope"].map((k) => [k, p.get(k)]),
      ),
    ).toEqual({
      client_id: "ep-console",
      response_type: "code",
      redirect_uri: `${publicUrl}/auth/oidc/callback`,
      code_challenge_method: "S256",
      scope: "openid profile email",
    });
    for (const k of ["state", "nonce", "code_challenge"]) expect(p.get(k)?.length).toBeGreaterThanOrEqual(32);
    // the flow cookie: short-lived, HttpOnly, only for the callback's path, and sealed (neither
    // the state nor anything readable is in it)
    expect(setCookie).toMatch(/HttpOnly; SameSite=Lax; Path=\/auth\/oidc; Max-Age=600$/);
    const opened = Buffer.from(cookie, "base64url").toString("utf8");
    expect(opened).not.toContain(p.get("state")!);
    expect(opened).not.toContain(p.get("nonce")!);
    expect(Object.keys(JSON.parse(opened)).sort()).toEqual(["ciphertext", "iv", "keyId", "tag"]);
  });
});

describe("beside it, the other ways in", () => {
  it("a token and a login link still open console sessions on a tower with sign-in configured", async () => {
    const byToken = await t.api("POST", "/auth/session", { token: t.adminToken }, null);
    expect(byToken.status).toBe(200);
    const { ticket } = (await t.api("POST", "/ep.tower.v1.AuthService/CreateTicket", { purpose: "login" })).body as {
      ticket: string;
    };
    const byLink = await t.api("POST", "/auth/session", { ticket }, null);
    expect({ status: byLink.status, role: (byLink.body as { role: string }).role }).toEqual({
      status: 200,
      role: "admin",
    });
  });
});

describe("a malformed or foreign answer at the callback", () => {
  const refused = (r: Awaited<ReturnType<typeof callback>>, status: number, reason: RegExp) => {
    expect({ status: r.status, type: r.type, reason: r.reason }).toEqual({
      status,
      type: "text/html; charset=utf-8",
      reason: expect.stringMatching(reason),
    });
    expect(r.html).not.toMatch(/\n\s+at |Error:/);
    // no session comes of it, and the flow cookie is spent
    expect(r.setCookie.some((c) => c.startsWith("ep_session="))).toBe(false);
    expect(r.setCookie).toContain("ep_oidc_flow=; HttpOnly; SameSite=Lax; Path=/auth/oidc; Max-Age=0");
  };

  it("without the flow cookie (another browser, or the cookie expired)", async () => {
    const { location } = await start();
    refused(
      await callback(`code=abc&state=${location.searchParams.get("state")}`),
      400,
      /^this browser has no sign-in under way/,
    );
  });

  it("with an altered or made-up flow cookie", async () => {
    const { location, cookie } = await start();
    const state = location.searchParams.get("state");
    const sealed = JSON.parse(Buffer.from(cookie, "base64url").toString("utf8"));
    sealed.ciphertext = Buffer.from('{"state":"mine"}').toString("base64");
    refused(
      await callback(`code=abc&state=${state}`, Buffer.from(JSON.stringify(sealed)).toString("base64url")),
      400,
      /^the sign-in cookie could not be opened/,
    );
    refused(
      await callback(`code=abc&state=${state}`, "not-base64-json"),
      400,
      /^the sign-in cookie could not be opened/,
    );
  });

  it("after the flow's ten minutes", async () => {
    const { location, cookie } = await start();
    clock.advance(10 * 60_000);
    refused(
      await callback(`code=abc&state=${location.searchParams.get("state")}`, cookie),
      400,
      /took longer than 10 minutes/,
    );
  });

  it("with no state, another state, or the state twice", async () => {
    const { location, cookie } = await start();
    const state = location.searchParams.get("state")!;
    refused(await callback("code=abc", cookie), 400, /^the sign-in response has no state/);
    refused(await callback("code=abc&state=forged", cookie), 400, /^state mismatch/);
    refused(await callback(`code=abc&state=${state}&state=${state}`, cookie), 400, /has state 2 times/);
  });

  it("with neither a code nor an error, an oversized code, or a code the provider never issued", async () => {
    const { location, cookie } = await start();
    const state = location.searchParams.get("state")!;
    refused(await callback(`state=${state}`, cookie), 400, /neither a code nor an error/);
    refused(
      await callback(`state=${state}&code=${"x".repeat(5000)}`, cookie),
      400,
      /code is longer than 4096 characters/,
    );
    refused(
      await callback(`state=${state}&code=never-issued&iss=${encodeURIComponent(idp.issuer)}`, cookie),
      400,
      /refused to exchange the code: invalid_grant/,
    );
  });

  it("the provider's error is shown for this browser's own sign-in only, and escaped", async () => {
    const { location, cookie } = await start();
    const state = location.searchParams.get("state")!;
    const description = encodeURIComponent("<script>alert(1)</script> no");
    const own = await callback(`state=${state}&error=access_denied&error_description=${description}`, cookie);
    const declined = new RegExp(
      String.raw`^you \(or the provider&#39;s policy\) declined the sign-in: ` +
        String.raw`access_denied \(&#60;script&#62;alert\(1\)&#60;\/script&#62; no\)$`,
    );
    refused(own, 403, declined);
    expect(own.html).not.toContain("<script>");
    // a forged link with someone else's message: only the mismatch is said
    const forged = await callback(`state=forged&error=access_denied&error_description=Call+this+number`, cookie);
    refused(forged, 400, /^state mismatch/);
    expect(forged.html).not.toContain("Call this number");
  });
});

describe("a tower without console sign-in configured", () => {
  let plain: TestTower;
  beforeAll(async () => {
    plain = await startTower();
  });
  afterAll(() => plain?.close());

  it("says so: the login page offers no provider, and both doors answer with a page", async () => {
    expect(await (await fetch(`${plain.url}/auth/oidc`)).json()).toEqual({ enabled: false });
    for (const path of ["/auth/oidc/start", "/auth/oidc/callback?code=x&state=y"]) {
      const res = await fetch(plain.url + path, { redirect: "manual" });
      expect(res.status).toBe(404);
      expect(await res.text()).toContain(
        "this tower does not offer sign-in through an identity " +
          "provider (EP_OIDC_ISSUER and EP_OIDC_CLIENT_ID are not set)",
      );
    }
  });
});

describe("a misconfigured issuer stops the start with the reason", () => {
  const closedPort = () =>
    new Promise<number>((resolve) => {
      const s = createServer().listen(0, "127.0.0.1", () => {
        const { port } = s.address() as { port: number };
        s.close(() => resolve(port));
      });
    });

  it("nothing listening, a wrong path, plain http elsewhere than loopback", async () => {
    const port = await closedPort();
    await expect(startTower({ env: ENV(`http://127.0.0.1:${port}`, "http://127.0.0.1:1") })).rejects.toMatchObject({
      code: "config_invalid",
      message: expect.stringMatching(
        new RegExp(`^EP_OIDC_ISSUER http://127.0.0.1:${port}: OpenID discovery failed \\(.*ECONNREFUSED.*\\)`),
      ),
    });
    await expect(startTower({ env: ENV(`${idp.issuer}/wrong`, "http://127.0.0.1:1") })).rejects.toMatchObject({
      code: "config_invalid",
      message: expect.stringMatching(
        /^EP_OIDC_ISSUER http:\/\/127\.0\.0\.1:\d+\/wrong: OpenID discovery failed \(.*404/,
      ),
    });
    await expect(startTower({ env: ENV("http://idp.example.test", "http://127.0.0.1:1") })).rejects.toMatchObject({
      code: "config_invalid",
      message: expect.stringMatching(/is plain http: use the provider's https URL/),
    });
  });

  it("the settings that make no sense together, before anything starts", async () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ EP_OIDC_CLIENT_ID: "ep" }, /^EP_OIDC_CLIENT_ID is set but EP_OIDC_ISSUER is not/],
      [
        { EP_OIDC_ISSUER: "not a url", EP_OIDC_CLIENT_ID: "ep" },
        /^EP_OIDC_ISSUER must be the identity provider's issuer URL/,
      ],
      [
        { EP_OIDC_ISSUER: idp.issuer, EP_OIDC_CLIENT_SECRET: "s" },
        /^EP_OIDC_CLIENT_SECRET is set but EP_OIDC_CLIENT_ID is not/,
      ],
      [
        { EP_OIDC_ISSUER: idp.issuer, EP_OIDC_CLIENT_ID: "ep", EP_OIDC_SCOPES: "profile email" },
        /^EP_OIDC_SCOPES must include openid/,
      ],
      [
        { EP_OIDC_ISSUER: idp.issuer, EP_OIDC_CLIENT_ID: "ep", EP_OIDC_RECHECK_SECONDS: "0" },
        /^EP_OIDC_RECHECK_SECONDS must be a positive integer/,
      ],
      [
        { EP_OIDC_ISSUER: idp.issuer, EP_OIDC_CLIENT_ID: "ep", EP_OIDC_DEFAULT_ROLE: "node" },
        /^EP_OIDC_DEFAULT_ROLE must be admin, operator or viewer/,
      ],
    ];
    for (const [env, message] of cases)
      await expect(startTower({ env })).rejects.toMatchObject({ message: expect.stringMatching(message) });
  });

  it("ep-tower exits 2 and prints why", async () => {
    const port = await closedPort();
    const home = tempHome();
    try {
      await spawnTowerChild({
        entry: join(ROOT, "bin", "ep-tower.js"),
        home: home.dir,
        env: ENV(`http://127.0.0.1:${port}`, "http://127.0.0.1:1"),
        timeoutMs: 60_000,
      });
      expect.unreachable("the tower started with an issuer that does not answer");
    } catch (err) {
      expect((err as Error).message).toMatch(
        new RegExp(`ep-tower exited 2: ep-tower: EP_OIDC_ISSUER http://127.0.0.1:${port}: OpenID discovery failed`),
      );
    } finally {
      home.cleanup();
    }
  }, 90_000);
});
