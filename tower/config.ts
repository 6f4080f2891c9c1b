// The tower's settings, from flags and the environment, checked once at start.
import { join } from "node:path";
import { towerHome } from "../common/paths.js";
import { EpError } from "../common/errors.js";
import { metricsListenOf } from "../common/metrics-server.js";
import { OIDC_CALLBACK_PATH, type OidcConfig } from "./domain/auth/index.js";
import type { Role } from "./domain/caller.js";
import { DEFAULT_LIMITS, type TowerLimits } from "./domain/deps.js";

export interface TowerConfig {
  host: string;
  port: number;
  /** the URL this tower is reached at, for login links and node.json */
  publicUrl: string;
  home: string;
  databaseUrl: string;
  tls?: { cert: string; key: string };
  allowInsecure: boolean;
  oidc?: OidcConfig;
  limits: TowerLimits;
  bodyLimit: number;
  /** slow clients: all request headers within headersTimeoutMs, the whole request within requestTimeoutMs */
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keyRotationMs: number;
  sweepMs: number;
  eventRetention: number;
  /** a second, plain-HTTP address that serves only /metrics, without a token (EP_METRICS_LISTEN; docs/metrics.md) */
  metricsListen?: { host: string; port: number };
  /** event stream: connections per minute per token, keep-alive, credential re-check, per-client buffer */
  stream: { rateLimit: number; keepAliveMs: number; recheckMs: number; maxBufferedBytes: number };
}

function positiveInt(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n <= 0)
    throw new EpError("invalid_argument", `${name} must be a positive integer (got ${JSON.stringify(raw)})`);
  return n;
}

export function parseListen(listen: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(listen);
  if (!m) throw new EpError("invalid_argument", `--listen must be host:port (got ${JSON.stringify(listen)})`);
  const port = Number(m[3]);
  if (port > 65535) throw new EpError("invalid_argument", `--listen port must be at most 65535 (got ${port})`);
  return { host: m[1] ?? (m[2] || "0.0.0.0"), port };
}

export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

const PEOPLE_ROLES = ["admin", "operator", "viewer"];

/**
 * OIDC: bearer JWTs (EP_OIDC_ISSUER + EP_OIDC_AUDIENCE) and, with EP_OIDC_CLIENT_ID, the
 * console's sign-in (authorization code flow with PKCE; docs/security.md). The audience of the
 * ID token is the client id, so with a client id EP_OIDC_AUDIENCE defaults to it.
 */
function oidcConfig(env: NodeJS.ProcessEnv, publicUrl: string): OidcConfig | undefined {
  const issuer = env.EP_OIDC_ISSUER;
  if (!issuer) {
    for (const name of ["EP_OIDC_CLIENT_ID", "EP_OIDC_CLIENT_SECRET", "EP_OIDC_AUDIENCE"]) {
      if (env[name])
        throw new EpError(
          "config_invalid",
          `${name} is set but EP_OIDC_ISSUER is not; set the issuer URL of your identity provider`,
          { setting: "EP_OIDC_ISSUER" },
        );
    }
    return undefined;
  }
  let url: URL;
  try {
    url = new URL(issuer);
  } catch {
    throw new EpError(
      "config_invalid",
      `EP_OIDC_ISSUER must be the identity provider's issuer URL (got ${JSON.stringify(issuer)})`,
      { setting: "EP_OIDC_ISSUER" },
    );
  }
  if (url.protocol !== "https:" && url.protocol !== "http:")
    throw new EpError("config_invalid", `EP_OIDC_ISSUER must be an https URL (got ${JSON.stringify(issuer)})`, {
      setting: "EP_OIDC_ISSUER",
    });
  const clientId = env.EP_OIDC_CLIENT_ID?.trim() || undefined;
  if (env.EP_OIDC_CLIENT_SECRET && !clientId)
    throw new EpError("config_invalid", "EP_OIDC_CLIENT_SECRET is set but EP_OIDC_CLIENT_ID is not", {
      setting: "EP_OIDC_CLIENT_ID",
    });
  const audience = env.EP_OIDC_AUDIENCE || clientId;
  if (!audience)
    throw new EpError(
      "invalid_argument",
      "EP_OIDC_AUDIENCE is required when EP_OIDC_ISSUER is set (or EP_OIDC_CLIENT_ID, for the console's sign-in)",
    );
  const explicitRole = env.EP_OIDC_DEFAULT_ROLE as Role | undefined;
  if (explicitRole !== undefined && !PEOPLE_ROLES.includes(explicitRole))
    throw new EpError("invalid_argument", "EP_OIDC_DEFAULT_ROLE must be admin, operator or viewer");
  const cfg: OidcConfig = {
    issuer,
    audience,
    roleClaim: env.EP_OIDC_ROLE_CLAIM || "ep_role",
    defaultRole: explicitRole ?? "viewer",
  };
  if (clientId) {
    cfg.login = {
      clientId,
      clientSecret: env.EP_OIDC_CLIENT_SECRET || undefined,
      providerName: env.EP_OIDC_PROVIDER_NAME?.trim() || url.hostname,
      scopes: env.EP_OIDC_SCOPES?.trim() || "openid profile email",
      redirectUri: `${publicUrl}${OIDC_CALLBACK_PATH}`,
      recheckMs: positiveInt("EP_OIDC_RECHECK_SECONDS", env.EP_OIDC_RECHECK_SECONDS, 300) * 1000,
      defaultRole: explicitRole,
    };
    if (!cfg.login.scopes.split(/\s+/).includes("openid"))
      throw new EpError(
        "config_invalid",
        `EP_OIDC_SCOPES must include openid (got ${JSON.stringify(cfg.login.scopes)})`,
        { setting: "EP_OIDC_SCOPES" },
      );
  }
  return cfg;
}

export function loadConfig(flags: { listen?: string }, env: NodeJS.ProcessEnv = process.env): TowerConfig {
  const { host, port } = parseListen(flags.listen ?? env.EP_LISTEN ?? "127.0.0.1:8008");
  const home = towerHome(env);
  const tls = env.EP_TLS_CERT && env.EP_TLS_KEY ? { cert: env.EP_TLS_CERT, key: env.EP_TLS_KEY } : undefined;
  if (Boolean(env.EP_TLS_CERT) !== Boolean(env.EP_TLS_KEY))
    throw new EpError("invalid_argument", "EP_TLS_CERT and EP_TLS_KEY must be set together");
  const allowInsecure = ["1", "true", "yes"].includes((env.EP_ALLOW_INSECURE ?? "").toLowerCase());
  if (!tls && !allowInsecure && !isLoopback(host)) {
    throw new EpError(
      "invalid_argument",
      `refusing plain HTTP on non-loopback address ${host}: set ` +
        `EP_TLS_CERT and EP_TLS_KEY, or EP_ALLOW_INSECURE=1 behind a TLS proxy`,
    );
  }
  const shownHost = host === "0.0.0.0" || host === "::" ? "localhost" : host.includes(":") ? `[${host}]` : host;
  const publicUrl = (
    env.EP_PUBLIC_URL ?? `${tls ? "https" : "http"}://${shownHost === "127.0.0.1" ? "localhost" : shownHost}:${port}`
  ).replace(/\/+$/, "");
  const oidc = oidcConfig(env, publicUrl);
  return {
    host,
    port,
    publicUrl,
    home,
    databaseUrl: env.EP_DATABASE_URL || `sqlite:${join(home, "ep.db")}`,
    tls,
    allowInsecure,
    oidc,
    limits: {
      leaseMs: positiveInt("EP_LEASE_MS", env.EP_LEASE_MS, DEFAULT_LIMITS.leaseMs),
      maxAttempts: positiveInt("EP_MAX_ATTEMPTS", env.EP_MAX_ATTEMPTS, DEFAULT_LIMITS.maxAttempts),
      maxClaimWaitMs: positiveInt("EP_MAX_CLAIM_WAIT_MS", env.EP_MAX_CLAIM_WAIT_MS, DEFAULT_LIMITS.maxClaimWaitMs),
    },
    bodyLimit: positiveInt("EP_BODY_LIMIT", env.EP_BODY_LIMIT, 1024 * 1024),
    headersTimeoutMs: positiveInt("EP_HEADERS_TIMEOUT_MS", env.EP_HEADERS_TIMEOUT_MS, 10_000),
    requestTimeoutMs: positiveInt("EP_REQUEST_TIMEOUT_MS", env.EP_REQUEST_TIMEOUT_MS, 30_000),
    keyRotationMs: positiveInt("EP_KEY_ROTATION_DAYS", env.EP_KEY_ROTATION_DAYS, 30) * 86_400_000,
    sweepMs: positiveInt("EP_SWEEP_MS", env.EP_SWEEP_MS, 1000),
    eventRetention: positiveInt("EP_EVENT_RETENTION", env.EP_EVENT_RETENTION, 1_000_000),
    metricsListen: metricsListenOf(env.EP_METRICS_LISTEN),
    stream: {
      rateLimit: positiveInt("EP_STREAM_RATE_LIMIT", env.EP_STREAM_RATE_LIMIT, 120),
      keepAliveMs: positiveInt("EP_STREAM_KEEPALIVE_MS", env.EP_STREAM_KEEPALIVE_MS, 15_000),
      recheckMs: positiveInt("EP_STREAM_RECHECK_MS", env.EP_STREAM_RECHECK_MS, 5_000),
      maxBufferedBytes: positiveInt("EP_STREAM_BUFFER_BYTES", env.EP_STREAM_BUFFER_BYTES, 1024 * 1024),
    },
  };
}
