// A real OpenID provider for tests: oidc-provider (a certified implementation) on a loopback
// port, with its development sign-in and consent pages (any login name, any password). Each
// account's claims come from `accounts`, read at each ask (a test may change them); an unknown
// login signs in with no claims but its sub. Its state (sessions, grants) lives in memory: one
// started again knows none of the tokens the last one issued.
import { createServer, type Server } from "node:http";
import Provider from "oidc-provider";

export interface TestProvider {
  issuer: string;
  /** RP-initiated logout: where a browser ends its session at the provider */
  endSessionUrl: string;
  close(): Promise<void>;
}

export interface TestProviderOptions {
  clientId: string;
  clientSecret: string;
  redirectUri: string;
  /** login name → claims (beside sub) */
  accounts: Record<string, Record<string, unknown>>;
  /** the claim that carries the EP role, released with the openid scope */
  roleClaim?: string;
  /** listen here (a free port by default): a provider started again on the same issuer URL */
  port?: number;
  /** token lifetimes in seconds */
  accessTokenTtl?: number;
  idTokenTtl?: number;
}

export async function startTestProvider(o: TestProviderOptions): Promise<TestProvider> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(o.port ?? 0, "127.0.0.1", resolve));
  const issuer = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const roleClaim = o.roleClaim ?? "ep_role";
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: o.clientId,
        client_secret: o.clientSecret,
        redirect_uris: [o.redirectUri],
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    async findAccount(_ctx: unknown, id: string) {
      return { accountId: id, claims: async () => ({ sub: id, ...(o.accounts[id] ?? {}) }) };
    },
    claims: { openid: ["sub", roleClaim], email: ["email", "email_verified"], profile: ["name"] },
    // the role in the ID token, as the usual providers are configured to send it
    conformIdTokenClaims: false,
    cookies: { keys: ["ep-test-provider-cookies"] },
    pkce: { required: () => true },
    ttl: { AccessToken: o.accessTokenTtl ?? 3600, IdToken: o.idTokenTtl ?? 3600 },
    features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
  });
  server.on("request", provider.callback());
  return {
    issuer,
    endSessionUrl: `${issuer}/session/end`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
