// The tower's node-token signing keys (ES256): made and rotated here, stored with the private
// half sealed under the secret-store key (the kid as AAD), re-sealed when that key rotates, and
// used to sign node JWTs and to verify them (signatures cached briefly, unknown kids re-read).
import * as jose from "jose";
import { iso } from "../../../common/clock.js";
import { EpError } from "../../../common/errors.js";
import { newId } from "../../../common/ids.js";
import type { Deps } from "../deps.js";
import { decryptSecret, encryptSecret, type SecretKeyring } from "../secrets/index.js";

const KEY_ALG = "ES256";
/** How long a verified node signature is reused (the node row is read on every call). */
const SIGNATURE_CACHE_MS = 1000;
const SIGNATURE_CACHE_MAX = 4096;

/** A private signing key as stored: AES-256-GCM under the secret-store key, the kid as AAD. */
const SEALED = "sealed:v1:";
const sealName = (kid: string) => `signing_key/${kid}`;

interface KeyEntry {
  kid: string;
  createdMs: number;
  privateKey: CryptoKey | Uint8Array;
  publicKey: CryptoKey | Uint8Array;
}

export interface SigningKeys {
  /** A node JWT for `nodeId`, signed with the newest key. */
  sign(nodeId: string, hostname: string): Promise<string>;
  /** The node id a JWT was signed for; `unauthenticated` / `token_expired` otherwise. */
  verify(jwt: string): Promise<string>;
  rotate(): Promise<string>;
  jwks(): Promise<{ keys: jose.JWK[] }>;
  /** Re-seals every private key under the current secret-store key (after a key rotation). */
  reseal(): Promise<void>;
  /** The JWT's signature was verified a moment ago (so it is a node token of this tower). */
  recentlyVerified(jwt: string): boolean;
  /** A key id of this tower's (or of another replica's, read again at most once a second). */
  owns(kid: string | undefined): Promise<boolean>;
}

export function createSigningKeys(
  deps: Deps,
  opts: { issuer: string; keyRotationMs: number; keyring?: () => SecretKeyring | undefined },
): SigningKeys {
  const { store, clock } = deps;
  let keys: KeyEntry[] | undefined;
  // node JWTs whose signature was verified lately
  const signedNodes = new Map<string, { nodeId: string; untilMs: number }>();

  const { seal, unseal } = createKeySealer(deps, opts.keyring);

  async function loadKeys(): Promise<KeyEntry[]> {
    if (keys) return keys;
    const rows = await store.listSigningKeys();
    const loaded: KeyEntry[] = [];
    for (const r of rows) {
      loaded.push({
        kid: r.kid,
        createdMs: Date.parse(r.createdAt),
        privateKey: await jose.importJWK(JSON.parse(await unseal(r.kid, r.privateJwk)) as jose.JWK, r.alg),
        publicKey: await jose.importJWK(JSON.parse(r.publicJwk) as jose.JWK, r.alg),
      });
    }
    keys = loaded;
    const newest = loaded.at(-1);
    if (!newest || clock.now() - newest.createdMs > opts.keyRotationMs) await rotateSigningKey();
    return keys;
  }

  async function rotateSigningKey(): Promise<string> {
    const { privateKey, publicKey } = await jose.generateKeyPair(KEY_ALG, { extractable: true });
    const kid = newId("key", clock.now());
    const privateJwk = await jose.exportJWK(privateKey);
    const publicJwk = await jose.exportJWK(publicKey);
    await store.insertSigningKey({
      kid,
      alg: KEY_ALG,
      privateJwk: seal(kid, JSON.stringify(privateJwk)),
      publicJwk: JSON.stringify({ ...publicJwk, kid, alg: KEY_ALG, use: "sig" }),
      createdAt: iso(clock.now()),
      retiredAt: "",
    });
    keys = [...(keys ?? []), { kid, createdMs: clock.now(), privateKey, publicKey }];
    return kid;
  }

  /**
   * Another replica may have made a key since this one loaded them: on an unknown key id,
   * read the key set again (at most once a second, so forged kids cannot hammer the store).
   */
  let lastReload = 0;
  async function reloadFor(kid: string | undefined): Promise<KeyEntry | undefined> {
    if (!kid || clock.now() - lastReload < 1000) return undefined;
    lastReload = clock.now();
    keys = undefined;
    return (await loadKeys()).find((k) => k.kid === kid);
  }

  async function verifyNodeSignature(jwt: string): Promise<string> {
    signedNodes.delete(jwt);
    const all = await loadKeys();
    let header: jose.ProtectedHeaderParameters;
    try {
      header = jose.decodeProtectedHeader(jwt);
    } catch {
      throw new EpError("unauthenticated", "the bearer token is not a valid JWT");
    }
    const key = all.find((k) => k.kid === header.kid) ?? (await reloadFor(header.kid));
    if (!key) throw new EpError("unauthenticated", "the node token was signed by a key this tower does not know");
    let payload: jose.JWTPayload;
    try {
      ({ payload } = await jose.jwtVerify(jwt, key.publicKey, {
        issuer: opts.issuer,
        currentDate: new Date(clock.now()),
      }));
    } catch (err) {
      if (err instanceof jose.errors.JWTExpired)
        throw new EpError("token_expired", "the node token has expired; register the node again");
      throw new EpError("unauthenticated", "the node token failed verification");
    }
    const nodeId = payload.sub ?? "";
    if (signedNodes.size >= SIGNATURE_CACHE_MAX) signedNodes.clear();
    const untilMs = Math.min(clock.now() + SIGNATURE_CACHE_MS, payload.exp ? payload.exp * 1000 : Infinity);
    signedNodes.set(jwt, { nodeId, untilMs });
    return nodeId;
  }

  return {
    async sign(nodeId, hostname) {
      const all = await loadKeys();
      const key = all[all.length - 1];
      return new jose.SignJWT({ hostname, role: "node" })
        .setProtectedHeader({ alg: KEY_ALG, kid: key.kid, typ: "JWT" })
        .setIssuer(opts.issuer)
        .setSubject(nodeId)
        .setIssuedAt(Math.floor(clock.now() / 1000))
        .sign(key.privateKey);
    },
    async verify(jwt) {
      const signed = signedNodes.get(jwt);
      return signed && signed.untilMs > clock.now() ? signed.nodeId : verifyNodeSignature(jwt);
    },
    async rotate() {
      await loadKeys();
      return rotateSigningKey();
    },
    async jwks() {
      await loadKeys();
      const rows = await store.listSigningKeys();
      return { keys: rows.map((r) => JSON.parse(r.publicJwk) as jose.JWK) };
    },
    recentlyVerified: (jwt) => signedNodes.has(jwt),
    async owns(kid) {
      return (await loadKeys()).some((k) => k.kid === kid) || Boolean(await reloadFor(kid));
    },
    async reseal() {
      if (!opts.keyring?.()) return;
      // unseal() logs a key it cannot open (once per key) and the tower goes on with the keys it can
      for (const r of await store.listSigningKeys()) await unseal(r.kid, r.privateJwk).catch(() => undefined);
    },
  };
}

/**
 * Sealing private signing keys under the secret-store key (the kid as AAD): keys stored in clear
 * or under EP_SECRET_KEY_PREVIOUS are re-sealed under the current key when read.
 */
function createKeySealer(deps: Deps, keyring: (() => SecretKeyring | undefined) | undefined) {
  const { store } = deps;
  const unsealFailures = new Set<string>();

  /** The private JWK as stored: sealed under the secret-store key when there is one. */
  function seal(kid: string, jwk: string): string {
    const ring = keyring?.();
    if (!ring) {
      deps.log.warn("no secret-store key: the node-token signing key is stored unencrypted until one is configured", {
        kid,
      });
      return jwk;
    }
    return SEALED + JSON.stringify(encryptSecret(ring.current, sealName(kid), jwk));
  }

  async function unseal(kid: string, stored: string): Promise<string> {
    const ring = keyring?.();
    if (!stored.startsWith(SEALED)) {
      // written before keys were sealed, or while no key was configured: seal it now
      if (ring) await store.updateSigningKeyPrivate(kid, seal(kid, stored));
      return stored;
    }
    if (!ring)
      throw new EpError(
        "config_invalid",
        `signing key ${kid} is encrypted under the secret-store key, which ` +
          `this tower does not have; set EP_SECRET_KEY or restore the key file`,
      );
    const cipher = JSON.parse(stored.slice(SEALED.length));
    let jwk: string;
    try {
      jwk = decryptSecret(ring, sealName(kid), cipher);
    } catch (err) {
      const e = new EpError(
        "config_invalid",
        `node-token signing key ${kid} is sealed under secret-store key ${cipher.keyId}, which this tower ` +
          `does not have (current ${ring.current.id}); start with the old key in EP_SECRET_KEY_PREVIOUS`,
        { setting: "EP_SECRET_KEY_PREVIOUS" },
      );
      if (!unsealFailures.has(kid)) {
        unsealFailures.add(kid);
        deps.log.error(e.message, { kid, error: (err as Error).message });
      }
      throw e;
    }
    // sealed under EP_SECRET_KEY_PREVIOUS: re-seal under the current key (rotation)
    if (cipher.keyId !== ring.current.id) await store.updateSigningKeyPrivate(kid, seal(kid, jwk));
    return jwk;
  }
  return { seal, unseal };
}
