// Where a request's credential is: the Authorization header (Bearer), else the console's session
// cookie. One reader for every door (HTTP routes, Connect, the events and attach WebSockets), so a
// malformed header is refused the same way everywhere.
import type { IncomingHttpHeaders } from "node:http";
import { EpError } from "../../common/errors.js";

/** The console's HttpOnly session cookie. */
export const SESSION_COOKIE = "ep_session";

export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === name) return decodeURIComponent(v.join("="));
  }
  return undefined;
}

/** The bearer token, else the session cookie; undefined when there is neither. */
export function credentialOf(headers: IncomingHttpHeaders): string | undefined {
  const h = headers.authorization;
  if (h) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
    if (!m) throw new EpError("unauthenticated", "the Authorization header must be 'Bearer <token>'");
    return m[1];
  }
  return readCookie(headers.cookie, SESSION_COOKIE);
}
