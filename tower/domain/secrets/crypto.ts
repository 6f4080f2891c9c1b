// Encryption at rest for the secret store: AES-256-GCM (node:crypto) with a fresh 96-bit IV
// per value and the secret's name as additional authenticated data, so a ciphertext moved to
// another row fails its check. Keys come from EP_SECRET_KEY, else from the key file
// ($EP_HOME/tower/secret.key, or EP_SECRET_KEY_FILE) that bootstrap creates (0600) at first
// start. Old keys for rotation come from EP_SECRET_KEY_PREVIOUS. Error messages name keys by
// their id only and never quote a value or a key.
import { createCipheriv, createDecipheriv, createHash, randomBytes, scryptSync } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { EpError } from "../../../common/errors.js";
import type { SecretCipher } from "../../store/secret-store.js";

export interface SecretKey {
  /** a short fingerprint (never the key): `k` + 16 hex of SHA-256 over a label and the key */
  id: string;
  key: Buffer;
  /** where it came from, for messages: "EP_SECRET_KEY", "EP_SECRET_KEY_PREVIOUS", the file path */
  source: string;
}

export interface SecretKeyring {
  /** encrypts every new value */
  current: SecretKey;
  /** decrypt only; values under them are re-encrypted under `current` at start */
  previous: SecretKey[];
  find(keyId: string): SecretKey | undefined;
}

const KDF_SALT = "ep-secret-key/v1";
const AAD_PREFIX = "ep-secret/v1:";
const derived = new Map<string, Buffer>();

/**
 * A key given as text: standard or URL-safe base64 of exactly 32 bytes is used as is; any other
 * non-empty string is a passphrase stretched with scrypt (N=2^15, r=8, p=1, fixed salt
 * "ep-secret-key/v1", so every replica given the same passphrase derives the same key).
 */
export function parseSecretKey(raw: string, source: string): SecretKey {
  const text = raw.trim();
  if (!text)
    throw new EpError(
      "config_invalid",
      `${source} is empty; give 32 random bytes in base64 (openssl rand -base64 32) or a passphrase`,
      { setting: source },
    );
  let key: Buffer | undefined;
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(text)) {
    const bytes = Buffer.from(text.replace(/-/g, "+").replace(/_/g, "/"), "base64");
    if (bytes.length === 32) key = bytes;
  }
  if (!key) {
    key = derived.get(text);
    if (!key) {
      key = scryptSync(text, KDF_SALT, 32, { N: 2 ** 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 });
      derived.set(text, key);
    }
  }
  return { id: keyIdOf(key), key, source };
}

export function keyIdOf(key: Buffer): string {
  return "k" + createHash("sha256").update("ep-secret-key-id/v1\0").update(key).digest("hex").slice(0, 16);
}

export function createKeyring(current: SecretKey, previous: SecretKey[] = []): SecretKeyring {
  const byId = new Map<string, SecretKey>();
  for (const k of [...previous].reverse()) byId.set(k.id, k);
  byId.set(current.id, current);
  return { current, previous: previous.filter((k) => k.id !== current.id), find: (id) => byId.get(id) };
}

/** The key file bootstrap writes: `$EP_HOME/tower/secret.key` unless EP_SECRET_KEY_FILE names another. */
export function secretKeyFile(towerHome: string, env: NodeJS.ProcessEnv = process.env): string {
  return env.EP_SECRET_KEY_FILE || join(towerHome, "secret.key");
}

/**
 * Loads the keyring from the environment and the key file; undefined when no key is configured
 * at all (the store then refuses to store or read secrets). A key file readable by group or
 * others is refused.
 */
export function loadKeyring(towerHome: string, env: NodeJS.ProcessEnv = process.env): SecretKeyring | undefined {
  let current: SecretKey | undefined;
  if (env.EP_SECRET_KEY) current = parseSecretKey(env.EP_SECRET_KEY, "EP_SECRET_KEY");
  else {
    const file = secretKeyFile(towerHome, env);
    if (existsSync(file)) {
      const mode = statSync(file).mode & 0o777;
      if (mode & 0o077) {
        throw new EpError(
          "config_invalid",
          `the secret-store key file ${file} is readable by others (mode ${mode.toString(8)}); run chmod 600 ${file}`,
          { setting: "EP_SECRET_KEY_FILE" },
        );
      }
      current = parseSecretKey(readFileSync(file, "utf8"), file);
    }
  }
  if (!current) return undefined;
  // one previous key (any text, commas included): every start re-encrypts under the current key, so one is enough
  const previous = env.EP_SECRET_KEY_PREVIOUS?.trim()
    ? [parseSecretKey(env.EP_SECRET_KEY_PREVIOUS, "EP_SECRET_KEY_PREVIOUS")]
    : [];
  return createKeyring(current, previous);
}

const aad = (name: string) => Buffer.from(AAD_PREFIX + name, "utf8");

export function encryptSecret(key: SecretKey, name: string, value: string): SecretCipher {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", key.key, iv);
  cipher.setAAD(aad(name));
  const ciphertext = Buffer.concat([cipher.update(value, "utf8"), cipher.final()]);
  return {
    ciphertext: ciphertext.toString("base64"),
    iv: iv.toString("base64"),
    tag: cipher.getAuthTag().toString("base64"),
    keyId: key.id,
  };
}

export function decryptSecret(ring: SecretKeyring, name: string, c: SecretCipher): string {
  const key = ring.find(c.keyId);
  if (!key) {
    throw new EpError(
      "config_invalid",
      `secret ${name} is encrypted under key ${c.keyId}, which this tower does not ` +
        `have (current key ${ring.current.id}); put the old key in EP_SECRET_KEY_PREVIOUS`,
      { setting: "EP_SECRET_KEY_PREVIOUS", key_id: c.keyId },
    );
  }
  try {
    const iv = Buffer.from(c.iv, "base64");
    const tag = Buffer.from(c.tag, "base64");
    if (iv.length !== 12 || tag.length !== 16) throw new Error("bad iv or tag length");
    const decipher = createDecipheriv("aes-256-gcm", key.key, iv, { authTagLength: 16 });
    decipher.setAAD(aad(name));
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(Buffer.from(c.ciphertext, "base64")), decipher.final()]).toString("utf8");
  } catch {
    throw new EpError(
      "internal",
      `secret ${name} failed its integrity check under key ${key.id}: ` +
        `the stored ciphertext was altered or the key is wrong`,
      { key_id: key.id },
    );
  }
}
