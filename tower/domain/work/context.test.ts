// Lease ids (the fencing token of a claim): shaped as leaseOf() accepts them, and distinct across
// the pool's refills.
import { describe, expect, it } from "vitest";
import { leaseOf, newLeaseId } from "./context.js";

describe("lease ids", () => {
  it(
    "1,000 in a row (several pool refills) are distinct, ls_ " +
      "and 16 url-safe characters, and accepted as lease ids",
    () => {
      const ids = Array.from({ length: 1000 }, newLeaseId);
      expect(new Set(ids).size).toBe(1000);
      for (const id of ids) {
        expect(id).toMatch(/^ls_[A-Za-z0-9_-]{16}$/);
        expect(leaseOf(id)).toBe(id);
      }
    },
  );
});
