// Cryptographically random bytes for ids and per-run credentials, drawn from a pool refilled
// 4 KB at a time: one randomBytes call per id cost ~10 µs of a claimed task in epd (a secrets
// session id per run) against ~0.1 µs from the pool. Bytes handed out are zeroed in the pool, so
// it never holds a copy of an issued secret.
import { randomBytes } from "node:crypto";

const POOL_SIZE = 4096;
let pool = Buffer.alloc(0);
let offset = 0;

/** `n` random bytes (CSPRNG, node:crypto), a fresh buffer owned by the caller. */
export function randomBytesPooled(n: number): Buffer {
  if (n > POOL_SIZE / 16) return randomBytes(n);
  if (offset + n > pool.length) {
    pool = randomBytes(POOL_SIZE);
    offset = 0;
  }
  const out = Buffer.from(pool.subarray(offset, offset + n));
  pool.fill(0, offset, offset + n);
  offset += n;
  return out;
}
