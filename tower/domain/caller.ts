// Who is calling, and what their role lets them do. Every domain function checks
// here, so no edge can forget.
import { EpError } from "../../common/errors.js";

export type Role = "admin" | "operator" | "viewer" | "node" | "agent";
export const ROLES: readonly Role[] = ["admin", "operator", "viewer", "node", "agent"];

export interface Caller {
  /** token id, OIDC subject, node id: who exactly presented the credential */
  subject: string;
  /**
   * the account behind the credential, stable across token rotation and console logins:
   * a service token's name, the OIDC subject, the node id. Owns AI sessions.
   */
  principal?: string;
  /** a person's name to show beside the principal (an OIDC sign-in's email or name) */
  name?: string;
  role: Role;
  via: "token" | "oidc" | "node" | "ticket" | "internal";
  /** agent tokens are scoped to one domain */
  domainId?: string;
  nodeId?: string;
  /** for nodes: the domains their agents are enrolled in (where they may operate) */
  nodeDomains?: readonly string[];
  /** for nodes: the domains they serve (registered; "*" for all): nothing outside them */
  nodeServes?: readonly string[];
  tokenId?: string;
  /** when the credential stops being valid (ms), if it does */
  expiresMs?: number;
  /** made by an identity provider's sign-in: what re-checks it with the provider (oidc-login/session-check.ts) */
  oidc?: OidcSessionScope;
  /** a console session: the hash of its cookie (ends at logout; tower/domain/auth/auth.ts) */
  sessionHash?: string;
}

/**
 * read: see resources and streams; operate: change work, approvals, AI sessions;
 * work: the claim loop (claim, heartbeat, complete, progress); admin: tokens, nodes,
 * secrets; node: calls only a node makes (link, publish events, resolve secrets).
 */
export type Permission = "read" | "operate" | "work" | "admin" | "node";

const GRANTS: Record<Role, readonly Permission[]> = {
  admin: ["read", "operate", "work", "admin"],
  operator: ["read", "operate", "work"],
  viewer: ["read"],
  node: ["read", "operate", "work", "node"],
  agent: ["read", "operate", "work"],
};

/**
 * The domains a caller is confined to, or undefined for all: an agent token's domain, a node's
 * registered set unless it serves "*". Lists are narrowed to these; single reads check them.
 */
export function scopeDomains(caller: Caller): readonly string[] | undefined {
  if (caller.role === "agent") return caller.domainId ? [caller.domainId] : [];
  if (caller.role === "node" && caller.nodeServes && !caller.nodeServes.includes("*")) return caller.nodeServes;
  return undefined;
}

export function can(caller: Caller, permission: Permission, scope: { domainId?: string } = {}): boolean {
  if (!GRANTS[caller.role].includes(permission)) return false;
  // a node reads, claims and enrolls only in the domains it serves ("" = across domains: lists narrow instead)
  if (
    caller.role === "node" &&
    scope.domainId &&
    caller.nodeServes &&
    !caller.nodeServes.includes("*") &&
    !caller.nodeServes.includes(scope.domainId)
  )
    return false;
  if (caller.role === "agent" && caller.domainId && scope.domainId !== undefined && scope.domainId !== caller.domainId)
    return false;
  // a node operates (submits and retries work for its agents) only in its agents' domains
  if (caller.role === "node" && permission === "operate")
    return scope.domainId !== undefined && (caller.nodeDomains ?? []).includes(scope.domainId);
  return true;
}

export function authorize(caller: Caller, permission: Permission, scope: { domainId?: string } = {}): void {
  if (!can(caller, permission, scope)) {
    throw new EpError(
      "forbidden",
      scope.domainId && caller.role === "agent"
        ? `role agent is scoped to domain ${caller.domainId ?? "(none)"}; this is ${scope.domainId}`
        : caller.role === "node" &&
            scope.domainId &&
            caller.nodeServes &&
            !caller.nodeServes.includes("*") &&
            !caller.nodeServes.includes(scope.domainId)
          ? `this node serves only ${caller.nodeServes.join(", ")}, not ` +
            `${scope.domainId} (an admin changes it with 'ep node domains set')`
          : caller.role === "node" && permission === "operate"
            ? `a node may operate only in domains where its agents are ` +
              `enrolled${scope.domainId ? ` (not ${scope.domainId})` : ""}`
            : `role ${caller.role} may not ${permission}`,
      { role: caller.role, needs: permission },
    );
  }
}

export const principalOf = (caller: Caller): string => caller.principal ?? caller.subject;

/** The tower acting on its own behalf (sweeper, bootstrap, approvals executing). */
export const INTERNAL_CALLER: Caller = { subject: "tower", role: "admin", via: "internal" };

/** What a console session made by an OIDC sign-in keeps of it (oidc-login/session-check.ts re-checks it). */
export interface OidcSessionScope {
  sub: string;
  /** the access token, sealed under the secret-store key (its AAD names the subject) */
  accessToken: string;
  signedInMs: number;
}
