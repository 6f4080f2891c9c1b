// The tower's settings, from flags and the environment, checked once at start.
import { join } from "node:path";
import { towerHome } from "../common/paths.js";
import { EpError } from "../common/errors.js";
import { metricsListenOf } from "../common/metrics-server.js";
import type { OidcConfig } from "./domain/auth.js";
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
  if (!Number.isInteger(n) || n <= 0) throw new EpError("invalid_argument", `${name} must be a positive integer (got ${JSON.stringify(raw)})`);
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

export function loadConfig(flags: { listen?: string }, env: NodeJS.ProcessEnv = process.env): TowerConfig {
  const { host, port } = parseListen(flags.listen ?? env.EP_LISTEN ?? "127.0.0.1:8008");
  const home = towerHome(env);
  const tls = env.EP_TLS_CERT && env.EP_TLS_KEY ? { cert: env.EP_TLS_CERT, key: env.EP_TLS_KEY } : undefined;
  if (Boolean(env.EP_TLS_CERT) !== Boolean(env.EP_TLS_KEY)) throw new EpError("invalid_argument", "EP_TLS_CERT and EP_TLS_KEY must be set together");
  const allowInsecure = ["1", "true", "yes"].includes((env.EP_ALLOW_INSECURE ?? "").toLowerCase());
  if (!tls && !allowInsecure && !isLoopback(host)) {
    throw new EpError(
      "invalid_argument",
      `refusing plain HTTP on non-loopback address ${host}: set EP_TLS_CERT and EP_TLS_KEY, or EP_ALLOW_INSECURE=1 behind a TLS proxy`,
    );
  }
  const shownHost = host === "0.0.0.0" || host === "::" ? "localhost" : host.includes(":") ? `[${host}]` : host;
  let oidc: OidcConfig | undefined;
  if (env.EP_OIDC_ISSUER) {
    if (!env.EP_OIDC_AUDIENCE) throw new EpError("invalid_argument", "EP_OIDC_AUDIENCE is required when EP_OIDC_ISSUER is set");
    const defaultRole = (env.EP_OIDC_DEFAULT_ROLE ?? "viewer") as Role;
    if (!["admin", "operator", "viewer"].includes(defaultRole)) throw new EpError("invalid_argument", "EP_OIDC_DEFAULT_ROLE must be admin, operator or viewer");
    oidc = { issuer: env.EP_OIDC_ISSUER, audience: env.EP_OIDC_AUDIENCE, roleClaim: env.EP_OIDC_ROLE_CLAIM ?? "ep_role", defaultRole };
  }
  return {
    host,
    port,
    publicUrl: (env.EP_PUBLIC_URL ?? `${tls ? "https" : "http"}://${shownHost === "127.0.0.1" ? "localhost" : shownHost}:${port}`).replace(/\/+$/, ""),
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
