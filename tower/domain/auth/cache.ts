// Credentials verified lately, keyed by their hash (or, for nodes, by node id): reused for
// AUTH_CACHE_MS without going back to the store (docs/api.md, "Authentication and roles"). A revoke or logout on this
// replica drops the entry at once; expiry is checked on every hit.
import type { Clock } from "../../../common/clock.js";
import type { Caller } from "../caller.js";

/**
 * How long a verified credential is reused without going back to the store: a revoke on another
 * replica takes effect within this bound.
 */
export const AUTH_CACHE_MS = 1000;
const AUTH_CACHE_MAX = 4096;

export class CallerCache {
  private readonly verified = new Map<string, { caller: Caller; untilMs: number }>();
  constructor(private readonly clock: Clock) {}

  get(key: string): Caller | undefined {
    const hit = this.verified.get(key);
    if (!hit) return undefined;
    const now = this.clock.now();
    if (hit.untilMs <= now || (hit.caller.expiresMs !== undefined && hit.caller.expiresMs <= now)) {
      this.verified.delete(key);
      return undefined;
    }
    return hit.caller;
  }

  set(key: string, caller: Caller): void {
    if (this.verified.size >= AUTH_CACHE_MAX) this.verified.clear();
    this.verified.set(key, { caller: Object.freeze(caller), untilMs: this.clock.now() + AUTH_CACHE_MS });
  }

  delete(key: string): void {
    this.verified.delete(key);
  }

  clear(): void {
    this.verified.clear();
  }

  /** Forgets every caller that came from this token (revoked). */
  dropToken(tokenId: string): void {
    for (const [key, hit] of this.verified) if (hit.caller.tokenId === tokenId) this.verified.delete(key);
  }
}
