// The console sign-in's shared types: what auth and the event stream name of a session's check.
import type { Caller, OidcSessionScope } from "../caller.js";

export type { OidcSessionScope } from "../caller.js";

export interface OidcSessionCheck {
  /** What the session keeps of a sign-in made now. */
  scopeOf(sub: string, accessToken: string): OidcSessionScope;
  /**
   * Resolves when a credential made from the sign-in (the session, a ticket it asked for) may go
   * on; throws (unauthenticated, saying why) when the sign-in has ended.
   */
  check(scope: OidcSessionScope, caller: Caller): Promise<void>;
}
