// The console talks to the tower it was served by: Connect clients (generated from proto/)
// and the few plain-HTTP routes the seed names (login cookie, SSE streams). The session is
// an HttpOnly cookie the browser sends by itself; no credential is ever visible to scripts.
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { AiService } from "@gen/ep/tower/v1/ai_pb.js";
import { ApprovalService } from "@gen/ep/tower/v1/approvals_pb.js";
import { AuthService } from "@gen/ep/tower/v1/auth_pb.js";
import { EventService } from "@gen/ep/tower/v1/events_pb.js";
import { AgentService, NodeService } from "@gen/ep/tower/v1/fleet_pb.js";
import { WorkService } from "@gen/ep/tower/v1/work_pb.js";
import { WebhookService } from "@gen/ep/tower/v1/webhooks_pb.js";

const transport = createConnectTransport({
  baseUrl: window.location.origin,
  fetch: (input, init) => globalThis.fetch(input, { ...init, credentials: "include" }),
});

export interface Api {
  work: Client<typeof WorkService>;
  agents: Client<typeof AgentService>;
  nodes: Client<typeof NodeService>;
  auth: Client<typeof AuthService>;
  events: Client<typeof EventService>;
  ai: Client<typeof AiService>;
  approvals: Client<typeof ApprovalService>;
  webhooks: Client<typeof WebhookService>;
}

export const api: Api = {
  work: createClient(WorkService, transport),
  agents: createClient(AgentService, transport),
  nodes: createClient(NodeService, transport),
  auth: createClient(AuthService, transport),
  events: createClient(EventService, transport),
  ai: createClient(AiService, transport),
  approvals: createClient(ApprovalService, transport),
  webhooks: createClient(WebhookService, transport),
};

export interface Identity {
  role: string;
  subject: string;
  /** a person's name (an identity provider's sign-in: the email), when the tower knows one */
  name?: string;
}

/** An error from the tower's JSON error body (`{"error": {code, message}}`) or the network. */
export class TowerError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

async function sessionCall(method: "GET" | "POST" | "DELETE", body?: unknown): Promise<Identity | null> {
  const res = await fetch("/auth/session", {
    method,
    credentials: "include",
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (method === "GET" && res.status === 401) return null;
  const data = (await res.json().catch(() => ({}))) as {
    role?: string;
    subject?: string;
    name?: string;
    error?: { code?: string; message?: string };
  };
  if (!res.ok)
    throw new TowerError(
      data.error?.code ?? "unknown",
      data.error?.message ?? `the tower answered ${res.status}`,
      res.status,
    );
  return method === "DELETE" ? null : { role: data.role ?? "", subject: data.subject ?? "", name: data.name };
}

/** The identity provider the tower signs people in with (GET /auth/oidc), or undefined when none. */
export async function oidcProvider(): Promise<{ name: string; startUrl: string } | undefined> {
  const res = await fetch("/auth/oidc", { credentials: "same-origin" });
  if (!res.ok) return undefined;
  const data = (await res.json().catch(() => ({}))) as { enabled?: boolean; provider?: string; start_url?: string };
  return data.enabled && data.provider && data.start_url
    ? { name: data.provider, startUrl: data.start_url }
    : undefined;
}

/** Who the session cookie belongs to, or null when nobody is logged in. */
export const whoAmI = () => sessionCall("GET");
/** Exchanges the one-time login ticket from the tower's printed URL for the session cookie. */
export const loginWithTicket = (ticket: string) => sessionCall("POST", { ticket });
/** Exchanges an API token for the session cookie (the token itself is not kept by the page). */
export const loginWithToken = (token: string) => sessionCall("POST", { token });
export const logout = () => sessionCall("DELETE");

/** A short human message for any error the clients throw. */
export function describeError(err: unknown): string {
  if (err instanceof ConnectError) {
    if (err.code === Code.Unimplemented) return "this tower does not offer that service yet";
    return err.rawMessage || Code[err.code];
  }
  if (err instanceof Error) return err.message;
  return String(err);
}

export function isUnauthenticated(err: unknown): boolean {
  return (
    (err instanceof ConnectError && err.code === Code.Unauthenticated) ||
    (err instanceof TowerError && err.status === 401)
  );
}
