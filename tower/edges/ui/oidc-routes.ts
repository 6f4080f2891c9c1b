// The console's sign-in through the identity provider, as browser navigations: GET /auth/oidc
// (whether it is offered, and the provider's name, for the login page), GET /auth/oidc/start
// (to the provider) and GET /auth/oidc/callback (back, into the session cookie). All three are
// public doors (tower/edges/http.ts isPublic): the caller has no credential yet. A sign-in that
// fails ends on a small page that says why, with a way back; never a stack trace, never JSON in
// a browser tab.
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Clock } from "../../../common/clock.js";
import { EpError, toEpError } from "../../../common/errors.js";
import type { Logger } from "../../../common/log.js";
import type { OidcLogin } from "../../domain/oidc-login/index.js";
import { readCookie, SESSION_COOKIE } from "../credential.js";

/** The sealed state, nonce and PKCE verifier of a sign-in under way (flow-state.ts). */
export const FLOW_COOKIE = "ep_oidc_flow";
export const OIDC_PATHS = { info: "/auth/oidc", start: "/auth/oidc/start", callback: "/auth/oidc/callback" } as const;

export function registerOidcRoutes(
  app: FastifyInstance,
  login: OidcLogin | undefined,
  o: { secure: boolean; log: Logger; clock: Clock },
): void {
  const secure = o.secure ? "; Secure" : "";
  // Lax, not Strict: the provider's redirect back is a cross-site navigation, and a Strict cookie
  // would not come with it. Only GETs to /auth/oidc carry it, for ten minutes.
  const flowCookie = (value: string, maxAge: number) =>
    `${FLOW_COOKIE}=${value}; HttpOnly; SameSite=Lax; Path=${OIDC_PATHS.info}${secure}; Max-Age=${maxAge}`;

  app.get(OIDC_PATHS.info, async () =>
    login ? { enabled: true, provider: login.providerName, start_url: OIDC_PATHS.start } : { enabled: false },
  );

  app.get(OIDC_PATHS.start, async (_req, reply) => {
    if (!login) return page(reply, notConfigured());
    try {
      const { url, flowCookie: sealed, maxAgeSeconds } = await login.begin();
      return reply
        .header("set-cookie", flowCookie(sealed, maxAgeSeconds))
        .header("cache-control", "no-store")
        .redirect(url, 302);
    } catch (err) {
      return page(reply, failure(err, o.log));
    }
  });

  app.get(OIDC_PATHS.callback, async (req, reply) => {
    if (!login) return page(reply, notConfigured());
    // the flow cookie is spent whatever happens: a second try starts a new sign-in
    void reply.header("set-cookie", flowCookie("", 0));
    try {
      const session = await login.complete(queryOf(req), readCookie(req.headers.cookie, FLOW_COOKIE));
      const maxAge = Math.max(1, Math.floor((session.expiresMs - o.clock.now()) / 1000));
      // set-cookie adds to the one above: the flow cookie goes, the session cookie comes
      void reply.header(
        "set-cookie",
        `${SESSION_COOKIE}=${encodeURIComponent(session.secret)}; ` +
          `HttpOnly; SameSite=Strict; Path=/${secure}; Max-Age=${maxAge}`,
      );
      return reply.header("cache-control", "no-store").redirect("/ui/", 302);
    } catch (err) {
      return page(reply, failure(err, o.log));
    }
  });
}

/** The raw query, as the provider sent it (repeats kept, so they can be refused). */
function queryOf(req: FastifyRequest): URLSearchParams {
  const i = req.url.indexOf("?");
  return new URLSearchParams(i < 0 ? "" : req.url.slice(i + 1));
}

function notConfigured(): EpError {
  return new EpError(
    "oidc_not_configured",
    "this tower does not offer sign-in through an identity provider (EP_OIDC_ISSUER " +
      "and EP_OIDC_CLIENT_ID are not set); sign in with the login link or an API token",
  );
}

function failure(err: unknown, log: Logger): EpError {
  const ep = toEpError(err);
  if (ep.code === "internal")
    log.error("console sign-in through the identity provider failed", {
      error: (err as Error)?.message ?? String(err),
      stack: (err as Error)?.stack,
    });
  else log.warn("console sign-in through the identity provider refused", { code: ep.code, error: ep.message });
  return ep;
}

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The failure page: what went wrong, in words, and the way back to the sign-in page. */
function page(reply: FastifyReply, ep: EpError): FastifyReply {
  const title =
    ep.code === "oidc_not_configured" ? "Sign-in through an identity provider is not set up" : "Sign-in did not work";
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>${escape(title)} · EP</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:4rem auto;padding:0 1rem;
color:#1b1f24;background:#fff}
@media (prefers-color-scheme:dark){body{color:#e6edf3;background:#0d1117}a{color:#79c0ff}}
code{font-size:.9em}</style></head>
<body><main><h1>${escape(title)}</h1><p id="reason" role="alert">${escape(ep.message)}</p>
<p class="muted">Error code: <code>${escape(ep.code)}</code></p>
<p><a href="/ui/login">Back to the sign-in page</a></p></main></body></html>
`;
  return reply
    .code(ep.httpStatus)
    .header("cache-control", "no-store")
    .header(
      "content-security-policy",
      "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    )
    .type("text/html; charset=utf-8")
    .send(html);
}
