// OIDC bearer tokens verified against the issuer's JWKS, served here by a small issuer.
import * as jose from "jose";
import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeClock } from "../test-support/fake-clock.js";
import { startTower, type TestTower } from "./harness.js";

let issuer: Server;
let issuerUrl: string;
let key: CryptoKey;
let t: TestTower;
const clock = new FakeClock("2026-05-01T00:00:00Z");

beforeAll(async () => {
  const pair = await jose.generateKeyPair("RS256");
  key = pair.privateKey;
  const jwk = { ...(await jose.exportJWK(pair.publicKey)), kid: "k1", alg: "RS256", use: "sig" };
  issuer = createServer((req, res) => {
    res.setHeader("content-type", "application/json");
    if (req.url === "/.well-known/openid-configuration")
      res.end(JSON.stringify({ issuer: issuerUrl, jwks_uri: `${issuerUrl}/jwks` }));
    else if (req.url === "/jwks") res.end(JSON.stringify({ keys: [jwk] }));
    else res.writeHead(404).end("{}");
  });
  await new Promise<void>((r) => issuer.listen(0, "127.0.0.1", r));
  issuerUrl = `http://127.0.0.1:${(issuer.address() as { port: number }).port}`;
  t = await startTower({ clock, env: { EP_OIDC_ISSUER: issuerUrl, EP_OIDC_AUDIENCE: "ep-tower" } });
});

afterAll(async () => {
  await t?.close();
  issuer?.close();
});

async function token(claims: Record<string, unknown>, opts: { exp?: number; aud?: string; iss?: string } = {}) {
  const now = Math.floor(clock.now() / 1000);
  return new jose.SignJWT(claims)
    .setProtectedHeader({ alg: "RS256", kid: "k1" })
    .setIssuer(opts.iss ?? issuerUrl)
    .setAudience(opts.aud ?? "ep-tower")
    .setSubject("alice")
    .setIssuedAt(now)
    .setExpirationTime(opts.exp ?? now + 600)
    .sign(key);
}

describe("OIDC tokens", () => {
  it("accepts a valid token with the role from its ep_role claim", async () => {
    const jwt = await token({ ep_role: "operator" });
    const res = await t.api("POST", "/domains", { name: "oidc" }, jwt);
    expect(res.status).toBe(201);
  });

  it("gives the default viewer role when the claim is absent", async () => {
    const jwt = await token({});
    expect((await t.api("GET", "/domains", undefined, jwt)).status).toBe(200);
    expect((await t.api("POST", "/domains", { name: "nope" }, jwt)).status).toBe(403);
  });

  it("rejects an expired token, a wrong audience and a foreign issuer", async () => {
    const expired = await token({ ep_role: "admin" }, { exp: Math.floor(clock.now() / 1000) + 60 });
    clock.advance(120_000);
    const res = await t.api("GET", "/domains", undefined, expired);
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe("token_expired");
    expect((await t.api("GET", "/domains", undefined, await token({}, { aud: "someone-else" }))).status).toBe(401);
    expect((await t.api("GET", "/domains", undefined, await token({}, { iss: "https://evil.example" }))).status).toBe(
      401,
    );
  });

  it("never lets an OIDC claim grant the node role", async () => {
    const jwt = await token({ ep_role: "node" });
    const res = await t.api("GET", "/domains", undefined, jwt);
    expect(res.status).toBe(200); // falls back to viewer
    expect((await t.api("POST", "/domains", { name: "x" }, jwt)).status).toBe(403);
  });
});
