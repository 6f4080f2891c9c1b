// Prefixed, sortable ids: <prefix>_<10 chars of time><12 chars of randomness>, Crockford base32.
import { randomBytesPooled } from "./random.js";

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

export type IdPrefix =
  | "dom"
  | "msn"
  | "tsk"
  | "agt"
  | "nod"
  | "ses"
  | "act"
  | "tok"
  | "trn"
  | "key"
  | "sec"
  | "tkt"
  | "apr"
  | "whk"
  | "whd";

let lastTime = 0;
let lastTimeText = "";
/** The randomness of the last id, one base32 digit (0–31) per byte, incremented within a millisecond. */
const lastRandom = new Uint8Array(12);

function encodeTime(ms: number): string {
  let out = "";
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[ms % 32] + out;
    ms = Math.floor(ms / 32);
  }
  return out;
}

/**
 * Monotonic within one process: ids made in the same millisecond still sort in creation order.
 * Built digit by digit into one string (no arrays): a task takes several (its id, its claims'
 * lease ids, its events), ~0.7 µs each against ~3 µs with Array.from(…).join.
 */
export function newId(prefix: IdPrefix, now: number = Date.now()): string {
  if (now <= lastTime) {
    for (let i = lastRandom.length - 1; i >= 0; i--) {
      if (lastRandom[i] < 31) {
        lastRandom[i]++;
        break;
      }
      lastRandom[i] = 0;
    }
  } else {
    const bytes = randomBytesPooled(12);
    for (let i = 0; i < 12; i++) lastRandom[i] = bytes[i] & 31;
    lastRandom[0] &= 15; // headroom so increments within one millisecond never wrap
    lastTime = now;
    lastTimeText = encodeTime(now);
  }
  let id = `${prefix}_${lastTimeText}`;
  for (let i = 0; i < 12; i++) id += ALPHABET[lastRandom[i]];
  return id;
}

export function hasPrefix(id: string, prefix: IdPrefix): boolean {
  return id.startsWith(`${prefix}_`);
}
