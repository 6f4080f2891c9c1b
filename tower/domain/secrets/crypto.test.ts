import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { EpError } from "../../../common/errors.js";
import { createKeyring, decryptSecret, encryptSecret, keyIdOf, loadKeyring, parseSecretKey } from "./crypto.js";

const VALUE = "s3cr3t-value-\u00e9\u{1F511}-" + "x".repeat(100);
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), "ep-seckey-"));
  dirs.push(d);
  return d;
};

function codeOf(fn: () => unknown): { code: string; message: string } {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(EpError);
    return { code: (err as EpError).code, message: (err as EpError).message };
  }
  throw new Error("expected an error");
}

describe("secret-store crypto", () => {
  const k1 = parseSecretKey(randomBytes(32).toString("base64"), "k1");
  const k2 = parseSecretKey(randomBytes(32).toString("base64"), "k2");

  it("round-trips under AES-256-GCM with a fresh IV each time, and the ciphertext is not the value", () => {
    const ring = createKeyring(k1);
    const a = encryptSecret(k1, "DB_PASSWORD", VALUE);
    const b = encryptSecret(k1, "DB_PASSWORD", VALUE);
    expect(a.iv).not.toBe(b.iv);
    expect(a.ciphertext).not.toBe(b.ciphertext);
    expect(a.keyId).toBe(k1.id);
    expect(Buffer.from(a.ciphertext, "base64").toString("utf8")).not.toContain("s3cr3t");
    expect(a.ciphertext).not.toContain("s3cr3t");
    expect(decryptSecret(ring, "DB_PASSWORD", a)).toBe(VALUE);
  });

  it("a base64 32-byte key is used as is; any other string is stretched, deterministically", () => {
    const raw = randomBytes(32);
    expect(parseSecretKey(raw.toString("base64"), "x").key.equals(raw)).toBe(true);
    expect(parseSecretKey(raw.toString("base64url"), "x").key.equals(raw)).toBe(true);
    const p1 = parseSecretKey("correct horse battery staple", "x");
    const p2 = parseSecretKey("  correct horse battery staple\n", "x");
    expect(p1.key).toHaveLength(32);
    expect(p1.key.equals(p2.key)).toBe(true);
    expect(p1.id).toBe(keyIdOf(p1.key));
    expect(parseSecretKey("another passphrase", "x").id).not.toBe(p1.id);
    // the key id is a fingerprint, not the key
    expect(p1.id).toMatch(/^k[0-9a-f]{16}$/);
    expect(codeOf(() => parseSecretKey("   ", "EP_SECRET_KEY")).code).toBe("config_invalid");
  });

  it("tampering with the ciphertext, the tag, the IV or the row's name is an error that quotes no value", () => {
    const ring = createKeyring(k1);
    const c = encryptSecret(k1, "API", VALUE);
    const flip = (b64: string) => {
      const b = Buffer.from(b64, "base64");
      b[0] ^= 1;
      return b.toString("base64");
    };
    for (const bad of [
      { ...c, ciphertext: flip(c.ciphertext) },
      { ...c, tag: flip(c.tag) },
      { ...c, iv: flip(c.iv) },
      { ...c, tag: "" },
      { ...c, iv: "AAAA" },
    ]) {
      const e = codeOf(() => decryptSecret(ring, "API", bad));
      expect(e.code).toBe("internal");
      expect(e.message).toContain("integrity check");
      expect(e.message).not.toContain("s3cr3t");
    }
    // the name is authenticated: a ciphertext copied to another secret does not decrypt
    expect(codeOf(() => decryptSecret(ring, "OTHER", c)).code).toBe("internal");
  });

  it(
    "the wrong key is an error: an unknown key id names the " + "setting, a wrong key under a known id fails the check",
    () => {
      const c = encryptSecret(k1, "API", VALUE);
      const missing = codeOf(() => decryptSecret(createKeyring(k2), "API", c));
      expect(missing.code).toBe("config_invalid");
      expect(missing.message).toContain("EP_SECRET_KEY_PREVIOUS");
      expect(missing.message).toContain(k1.id);
      const impostor = { ...k2, id: k1.id };
      expect(codeOf(() => decryptSecret(createKeyring(impostor), "API", c)).code).toBe("internal");
    },
  );

  it("rotation: a ring with the old key as previous reads old values and encrypts new ones under the new key", () => {
    const old = encryptSecret(k1, "API", VALUE);
    const ring = createKeyring(k2, [k1]);
    expect(ring.current.id).toBe(k2.id);
    expect(decryptSecret(ring, "API", old)).toBe(VALUE);
    const renewed = encryptSecret(ring.current, "API", decryptSecret(ring, "API", old));
    expect(renewed.keyId).toBe(k2.id);
    expect(decryptSecret(createKeyring(k2), "API", renewed)).toBe(VALUE);
    expect(codeOf(() => decryptSecret(createKeyring(k1), "API", renewed)).code).toBe("config_invalid");
  });

  it(
    "loadKeyring: EP_SECRET_KEY wins over the file, the file " +
      "is read when 0600 and refused when wider, none → undefined",
    () => {
      const home = tmp();
      expect(loadKeyring(home, {})).toBeUndefined();
      const fileKey = randomBytes(32).toString("base64");
      const file = join(home, "secret.key");
      writeFileSync(file, fileKey + "\n", { mode: 0o600 });
      expect(loadKeyring(home, {})!.current.key.equals(Buffer.from(fileKey, "base64"))).toBe(true);
      expect(loadKeyring(home, {})!.current.source).toBe(file);
      expect(loadKeyring(home, { EP_SECRET_KEY: k2.key.toString("base64") })!.current.id).toBe(k2.id);
      chmodSync(file, 0o644);
      const wide = codeOf(() => loadKeyring(home, {}));
      expect(wide.code).toBe("config_invalid");
      expect(wide.message).toContain("chmod 600");
      expect(wide.message).not.toContain(fileKey);
      const other = join(tmp(), "k");
      writeFileSync(other, k1.key.toString("base64"), { mode: 0o600 });
      const ring = loadKeyring(home, { EP_SECRET_KEY_FILE: other, EP_SECRET_KEY_PREVIOUS: k2.key.toString("base64") })!;
      expect(ring.current.id).toBe(k1.id);
      expect(ring.previous.map((k) => k.id)).toEqual([k2.id]);
      expect(ring.find(k2.id)).toBeDefined();
      // a passphrase with commas is one key
      const pass = loadKeyring(home, { EP_SECRET_KEY_FILE: other, EP_SECRET_KEY_PREVIOUS: "old, passphrase" })!;
      expect(pass.previous.map((k) => k.id)).toEqual([parseSecretKey("old, passphrase", "x").id]);
    },
  );
});
