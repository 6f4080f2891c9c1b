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
let lastRandom: Uint8Array = new Uint8Array(12);

function encodeTime(ms: number): string {
  let out = "";
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[ms % 32] + out;
    ms = Math.floor(ms / 32);
  }
  return out;
}

/** Monotonic within one process: ids made in the same millisecond still sort in creation order. */
export function newId(prefix: IdPrefix, now: number = Date.now()): string {
  let random: Uint8Array;
  if (now <= lastTime) {
    random = Uint8Array.from(lastRandom);
    for (let i = random.length - 1; i >= 0; i--) {
      if (random[i] < 31) {
        random[i]++;
        break;
      }
      random[i] = 0;
    }
    now = lastTime;
  } else {
    random = Uint8Array.from(randomBytesPooled(12), (b) => b & 31);
    random[0] &= 15; // headroom so increments within one millisecond never wrap
  }
  lastTime = now;
  lastRandom = random;
  return `${prefix}_${encodeTime(now)}${Array.from(random, (b) => ALPHABET[b]).join("")}`;
}

export function hasPrefix(id: string, prefix: IdPrefix): boolean {
  return id.startsWith(`${prefix}_`);
}
