// A console session that came from the identity provider ends when the identity does: at the
// ID / access token's expiry (the session's own expiry, auth/tickets.ts) and, before that,
// when the provider stops standing behind the sign-in. For the second, the session is asked
// about again at most every `recheckMs` (EP_OIDC_RECHECK_SECONDS): the provider's userinfo
// endpoint, with the access token it gave at sign-in. A refusal (the provider's session ended,
// the grant was revoked, the account was disabled) or a role claim that changed ends the session;
// a provider that does not answer is asked again shortly, never taken as a decision.
// docs/security.md says why this and not refresh tokens or back-channel logout.
import type { Clock } from "../../../common/clock.js";
import { EpError } from "../../../common/errors.js";
import type { Logger } from "../../../common/log.js";
import { claimedRole, PERSON_ROLES, hashSecret } from "../auth/index.js";
import type { Caller, OidcSessionScope } from "../caller.js";

export type { OidcSessionScope } from "../caller.js";
import { decryptSecret, encryptSecret, type SecretKeyring } from "../secrets/index.js";
import type { RelyingParty } from "./relying-party.js";
import type { OidcSessionCheck } from "./types.js";

/** What a console session keeps of its sign-in (in the session's scope; the token sealed). */

/** After a provider that did not answer, the next try is this much later at most. */
const RETRY_UNANSWERED_MS = 30_000;
/** bound on the sessions remembered; past it the memory starts again from each sign-in time */
const MAX_REMEMBERED = 10_000;
const aadOf = (sub: string) => `oidc-access-token/${sub}`;

export function createOidcSessionCheck(o: {
  rp: RelyingParty;
  clock: Clock;
  log: Logger;
  keyring: () => SecretKeyring | undefined;
  recheckMs: number;
  roleClaim: string;
}): OidcSessionCheck {
  const { clock, recheckMs } = o;
  // when each sign-in was last confirmed, on this replica, by its sealed token (one sign-in, one
  // entry, whatever was derived from it); another replica, or this one after a restart, starts
  // from the sign-in time: it asks at most recheckMs late, never later
  const confirmed = new Map<string, number>();
  const asking = new Map<string, Promise<void>>();

  function ring(): SecretKeyring {
    const r = o.keyring();
    if (!r)
      throw new EpError(
        "unavailable",
        "console sign-in through OIDC needs the secret-store key " +
          "(EP_SECRET_KEY or the key file the tower writes at first start)",
      );
    return r;
  }

  async function ask(hash: string, scope: OidcSessionScope, caller: Caller): Promise<void> {
    let token: string;
    try {
      token = decryptSecret(ring(), aadOf(scope.sub), JSON.parse(scope.accessToken));
    } catch {
      throw new EpError(
        "unauthenticated",
        "this console session's sign-in cannot be checked (sealed under another secret-store key); sign in again",
      );
    }
    const now = clock.now();
    const answer = await o.rp.userinfo(token, scope.sub);
    if (answer.ok) {
      const raw = answer.claims[o.roleClaim];
      const role = claimedRole(answer.claims, o.roleClaim, PERSON_ROLES);
      if (raw !== undefined && role !== caller.role) {
        throw new EpError(
          "unauthenticated",
          `your role at the identity provider is now ${role ?? JSON.stringify(raw)}, not ${caller.role}; sign in again`,
        );
      }
      remember(hash, now);
      return;
    }
    if (answer.ended)
      throw new EpError(
        "unauthenticated",
        `the identity provider no longer stands behind this sign-in (${answer.reason}); sign in again`,
      );
    o.log.warn("the identity provider did not answer a console session's re-check; asking again shortly", {
      subject: caller.principal ?? caller.subject,
      error: answer.reason,
    });
    remember(hash, now - recheckMs + Math.min(recheckMs, RETRY_UNANSWERED_MS));
  }

  function remember(hash: string, atMs: number): void {
    if (confirmed.size >= MAX_REMEMBERED) confirmed.clear();
    confirmed.set(hash, atMs);
  }

  return {
    scopeOf(sub, accessToken) {
      return {
        sub,
        accessToken: JSON.stringify(encryptSecret(ring().current, aadOf(sub), accessToken)),
        signedInMs: clock.now(),
      };
    },

    async check(scope, caller) {
      const hash = hashSecret(scope.accessToken);
      const last = Math.max(confirmed.get(hash) ?? 0, scope.signedInMs);
      if (clock.now() - last < recheckMs) return;
      let pending = asking.get(hash);
      if (!pending) {
        pending = ask(hash, scope, caller).finally(() => asking.delete(hash));
        asking.set(hash, pending);
      }
      return pending;
    },
  };
}
