// Console sign-in through a real OpenID provider (oidc-provider, in this process) in chromium:
// the authorization code flow with PKCE from the console's login page and back, the role from
// the claim, and the session ending with the identity (the provider's session, the token's
// expiry: the tower's clock is a FakeClock, so an hour passes without waiting). The failures a
// person can meet end on a page that says why.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeClock } from "../test-support/fake-clock.js";
import { startTestProvider, type TestProvider } from "../test-support/oidc-provider.js";
import { CHROMIUM, ensureConsoleBuilt, launchChromium } from "./browser.js";
import { freePort, startTower, type TestTower } from "./harness.js";
import { optionalTool } from "./optional-tools.js";

const chromiumTool = optionalTool(CHROMIUM, { pkg: "chromium", suite: "web-oidc-sign-in" });
const RECHECK_S = 60;
const TOKEN_TTL_S = 3600;
/**
 * Whoever asks first after the re-check interval hears the provider's reason; the session is
 * gone for everyone after (the console's own event stream, re-checking on the same clock, may be
 * first). Nothing else ends a session here before the tokens' hour is up.
 */
const ENDED_BY_PROVIDER = new RegExp(
  String.raw`^(the identity provider no longer stands behind this sign-in \(.+\); sign in again|` +
    String.raw`the console session has ended \(logged out, expired or unknown\); sign in again)$`,
);

let idp: TestProvider;
let idpOptions: Parameters<typeof startTestProvider>[0];
let t: TestTower;
let publicUrl: string;
let ctx: BrowserContext;
let page: Page;
let profile: string;
const clock = new FakeClock(Date.now());
const pageErrors: string[] = [];

/** From the console's login page through the provider's sign-in (and consent) pages. */
async function signInAtProvider(login: string, consent: "continue" | "cancel" = "continue") {
  await page.goto(`${publicUrl}/ui/login`);
  await page.getByRole("link", { name: "Sign in with Test IdP" }).click();
  await page.locator('input[name="login"]').fill(login);
  await page.locator('input[name="password"]').fill("any password");
  await page.getByRole("button", { name: "Sign-in" }).click();
  if (consent === "cancel") await page.getByRole("link", { name: "[ Cancel ]" }).click();
  else await page.getByRole("button", { name: "Continue" }).click();
}

/** GET /auth/session with the browser's cookies (through the context: the failure page's CSP allows no fetch). */
async function session() {
  const res = await ctx.request.get(`${publicUrl}/auth/session`);
  return {
    status: res.status(),
    body: (await res.json()) as { role?: string; subject?: string; name?: string; error?: { message: string } },
  };
}

describe.skipIf(chromiumTool.skip)("console sign-in through OIDC in chromium", () => {
  beforeAll(async () => {
    chromiumTool.require();
    await ensureConsoleBuilt();
    const port = await freePort();
    publicUrl = `http://127.0.0.1:${port}`;
    idpOptions = {
      clientId: "ep-console",
      clientSecret: "client-secret-for-tests",
      redirectUri: `${publicUrl}/auth/oidc/callback`,
      accessTokenTtl: TOKEN_TTL_S,
      idTokenTtl: TOKEN_TTL_S,
      accounts: {
        alice: { ep_role: "operator", email: "alice@example.test" },
        root: { ep_role: ["admin"], email: "root@example.test" },
        nobody: { email: "nobody@example.test" },
      },
    };
    idp = await startTestProvider(idpOptions);
    t = await startTower({
      clock,
      port,
      env: {
        EP_PUBLIC_URL: publicUrl,
        EP_OIDC_ISSUER: idp.issuer,
        EP_OIDC_CLIENT_ID: "ep-console",
        EP_OIDC_CLIENT_SECRET: "client-secret-for-tests",
        EP_OIDC_PROVIDER_NAME: "Test IdP",
        EP_OIDC_RECHECK_SECONDS: String(RECHECK_S),
        EP_SECRET_KEY: "oidc-sign-in-test",
      },
    });
    profile = mkdtempSync(join(tmpdir(), "ep-chromium-oidc-"));
    ctx = await launchChromium(profile);
    page = ctx.pages()[0] ?? (await ctx.newPage());
    page.on("pageerror", (err) => pageErrors.push(err.message));
  }, 60_000);

  afterAll(async () => {
    await ctx?.close();
    await t?.close();
    await idp?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  it("offers the provider beside the login link and the token, and lands with the claimed role", async () => {
    await page.goto(`${publicUrl}/ui/login`);
    await page.getByRole("link", { name: "Sign in with Test IdP" }).waitFor();
    await page.getByLabel("API token").waitFor();

    await signInAtProvider("alice");
    await page.getByRole("navigation", { name: "Views" }).waitFor();
    await page.getByText("alice@example.test · operator").waitFor();
    const me = await session();
    expect(me).toEqual({ status: 200, body: { role: "operator", subject: "oidc:alice", name: "alice@example.test" } });

    const cookies = await ctx.cookies(publicUrl);
    const sessionCookie = cookies.find((c) => c.name === "ep_session");
    expect(sessionCookie).toMatchObject({ httpOnly: true, sameSite: "Strict" });
    // bound to the identity: the cookie lives as long as the provider's tokens, not 7 days
    expect(sessionCookie!.expires * 1000 - Date.now()).toBeLessThanOrEqual(TOKEN_TTL_S * 1000);
    expect(cookies.find((c) => c.name === "ep_oidc_flow")).toBeUndefined();
    // an operator may operate: the tower agrees with the claim, not only the header
    const created = await page.evaluate(
      async () =>
        (
          await fetch("/domains", {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ name: "oidc-signed-in" }),
          })
        ).status,
    );
    expect(created).toBe(201);
    const tokens = await page.evaluate(
      async () =>
        (
          await fetch("/ep.tower.v1.AuthService/ListTokens", {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: "{}",
          })
        ).status,
    );
    expect(tokens).toBe(403);
  }, 60_000);

  it("loses the session once the provider's session ends (at the next re-check)", async () => {
    // a login link made from this session: derived, it must not outlive the provider's word either
    const ticket = await page.evaluate(async () => {
      const res = await fetch("/ep.tower.v1.AuthService/CreateTicket", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ purpose: "login" }),
      });
      return ((await res.json()) as { ticket: string }).ticket;
    });
    expect(ticket).toMatch(/^tkt_/);
    await page.goto(idp.endSessionUrl);
    await page.getByRole("button", { name: "Yes, sign me out" }).click();
    await page.waitForURL((u) => u.href.startsWith(idp.issuer) && !u.pathname.endsWith("/session/end"));
    // within the re-check interval the session stands (the provider is not asked on every call)
    await page.goto(`${publicUrl}/ui/`);
    expect((await session()).status).toBe(200);
    // nothing else asks meanwhile (the open console's event stream would be the first to notice)
    await page.goto("about:blank");
    clock.advance(RECHECK_S * 1000 + 1000);
    const ended = await session();
    expect(ended.status).toBe(401);
    expect(ended.body.error?.message).toMatch(ENDED_BY_PROVIDER);
    await page.goto(`${publicUrl}/ui/`);
    await page.getByRole("link", { name: "Sign in with Test IdP" }).waitFor();
    const byTicket = await ctx.request.post(`${publicUrl}/auth/session`, { data: { ticket } });
    expect(byTicket.status()).toBe(401);
    expect(((await byTicket.json()) as { error: { message: string } }).error.message).toMatch(
      /^the identity provider no longer stands behind this sign-in/,
    );
  }, 60_000);

  it("a role changed at the provider ends the session at the next re-check", async () => {
    await ctx.clearCookies();
    await signInAtProvider("alice");
    await page.getByText("alice@example.test · operator").waitFor();
    idpOptions.accounts.alice.ep_role = "viewer";
    clock.advance(RECHECK_S * 1000 + 1000);
    // the open console's event stream re-checks its credential: the console goes to its sign-in page by itself
    await page.getByText("Your session ended; sign in again.").waitFor({ timeout: 15_000 });
    const ended = await session();
    expect(ended.status).toBe(401);
    // signing in again (the provider's session stands: straight back) gives the new role
    await page.goto(`${publicUrl}/ui/login`);
    await page.getByRole("link", { name: "Sign in with Test IdP" }).click();
    await page.getByText("alice@example.test · viewer").waitFor();
  }, 60_000);

  it("a provider that does not answer is no decision; one that forgot the sign-in ends it", async () => {
    expect((await session()).body.role).toBe("viewer");
    const port = Number(new URL(idp.issuer).port);
    await idp.close();
    clock.advance(RECHECK_S * 1000 + 1000);
    // the re-check found nobody to ask: the session goes on (until its token's expiry at the latest)
    expect((await session()).status).toBe(200);
    // the provider back, without the grants it had (its memory is gone): asked again 30 s later
    idp = await startTestProvider({ ...idpOptions, port });
    expect((await session()).status).toBe(200);
    clock.advance(30_000);
    const ended = await session();
    expect(ended.status).toBe(401);
    expect(ended.body.error?.message).toMatch(ENDED_BY_PROVIDER);
  }, 60_000);

  it("loses the session when the provider's tokens expire", async () => {
    await ctx.clearCookies();
    await signInAtProvider("root");
    await page.getByText("root@example.test · admin").waitFor();
    expect((await session()).body.role).toBe("admin");
    clock.advance(TOKEN_TTL_S * 1000);
    expect((await session()).status).toBe(401);
    await page.reload();
    await page.getByRole("link", { name: "Sign in with Test IdP" }).waitFor();
  }, 60_000);

  it("a declined consent ends on a page that says so", async () => {
    await ctx.clearCookies();
    await signInAtProvider("carol", "cancel");
    await page.getByRole("heading", { name: "Sign-in did not work" }).waitFor();
    const reason = await page.locator("#reason").textContent();
    expect(reason).toMatch(/declined the sign-in: access_denied/);
    expect(await page.content()).not.toMatch(/\n\s+at /);
    expect((await session()).status).toBe(401);
  }, 60_000);

  it("an identity without the role claim is refused with the reason", async () => {
    await ctx.clearCookies();
    await signInAtProvider("nobody");
    await page.getByRole("heading", { name: "Sign-in did not work" }).waitFor();
    expect(await page.locator("#reason").textContent()).toMatch(/nobody@example\.test\) carries no ep_role claim/);
    await page.getByRole("link", { name: "Back to the sign-in page" }).click();
    await page.getByRole("link", { name: "Sign in with Test IdP" }).waitFor();
  }, 60_000);

  it("an answer that is not for this browser's sign-in is a state mismatch", async () => {
    await ctx.clearCookies();
    await page.goto(`${publicUrl}/auth/oidc/start`);
    await page.locator('input[name="login"]').waitFor();
    await page.goto(`${publicUrl}/auth/oidc/callback?code=forged-code&state=forged-state`);
    expect(await page.locator("#reason").textContent()).toMatch(/^state mismatch/);
    expect((await session()).status).toBe(401);
  }, 60_000);

  it("raised no uncaught page errors", () => {
    expect(pageErrors).toEqual([]);
  });
});
