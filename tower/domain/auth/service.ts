// The AuthService contract over the Auth core.
import { RoleSchema } from "../../../gen/ep/tower/v1/resources_pb.js";
import { roleOf, wordOf } from "../convert.js";
import { create } from "@bufbuild/protobuf";
import * as pb from "../../../gen/ep/tower/v1/auth_pb.js";
import { invalidField } from "../../../common/errors.js";
import type { Auth } from "./auth.js";
import { authorize, type Caller } from "../caller.js";
import { tokenMsg } from "../convert.js";
import { paginate } from "../paging.js";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { Deps } from "../deps.js";
import { createIdempotency, type AnswerSealer } from "../idempotency.js";
import { decryptSecret, encryptSecret, type SecretKeyring } from "../secrets/index.js";

export function createAuthService(auth: Auth, deps: Deps, keyring: () => SecretKeyring | undefined) {
  const idempotent = createIdempotency(deps);
  return {
    async createToken(caller: Caller, req: pb.CreateTokenRequest): Promise<pb.CreateTokenResponse> {
      if (req.ttlSeconds < 0n) throw invalidField("ttl_seconds", "must be zero (no expiry) or positive");
      const call = {
        caller,
        method: "AuthService.CreateToken",
        input: pb.CreateTokenRequestSchema,
        request: req,
        output: pb.CreateTokenResponseSchema,
        sealer: () => tokenSealer(keyring()),
      };
      return idempotent(call, async (tx) => {
        const { token, secret } = await auth.createToken(
          caller,
          {
            name: req.name,
            role: wordOf(RoleSchema, req.role, "role"),
            domainId: req.domainId,
            ttlSeconds: Number(req.ttlSeconds),
          },
          tx,
        );
        return create(pb.CreateTokenResponseSchema, { token: tokenMsg(token), secret });
      });
    },
    async listTokens(caller: Caller, req: pb.ListTokensRequest): Promise<pb.ListTokensResponse> {
      const { page, nextPageToken } = paginate(await auth.listTokens(caller), (t) => t.id, req);
      return create(pb.ListTokensResponseSchema, { tokens: page.map(tokenMsg), nextPageToken });
    },
    async revokeToken(caller: Caller, req: pb.RevokeTokenRequest): Promise<pb.RevokeTokenResponse> {
      if (!req.tokenId) throw invalidField("token_id", "is required");
      return create(pb.RevokeTokenResponseSchema, { token: tokenMsg(await auth.revokeToken(caller, req.tokenId)) });
    },
    async whoAmI(caller: Caller, _req: pb.WhoAmIRequest): Promise<pb.WhoAmIResponse> {
      authorize(caller, "read");
      return create(pb.WhoAmIResponseSchema, {
        subject: caller.subject,
        role: roleOf(caller.role),
        domainId: caller.domainId ?? "",
        tokenId: caller.tokenId ?? "",
      });
    },
    async createTicket(caller: Caller, req: pb.CreateTicketRequest): Promise<pb.CreateTicketResponse> {
      authorize(caller, "read");
      const { ticket, expiresMs } = await auth.createTicket(caller, { purpose: req.purpose, agentId: req.agentId });
      return create(pb.CreateTicketResponseSchema, { ticket, expiresAt: timestampFromMs(expiresMs) });
    },
  };
}

const SEALED_ANSWER = "ep-idempotent-answer/AuthService.CreateToken";

/**
 * A new token's answer holds its secret: stored for a replay only sealed under the secret-store key (none without one).
 */
function tokenSealer(ring: SecretKeyring | undefined): AnswerSealer | undefined {
  if (!ring) return undefined;
  return {
    seal: (text) => JSON.stringify(encryptSecret(ring.current, SEALED_ANSWER, text)),
    unseal: (text) => decryptSecret(ring, SEALED_ANSWER, JSON.parse(text)),
  };
}
