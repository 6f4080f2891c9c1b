// ep token create|ls|revoke: service-account tokens.
import { RoleSchema, type Role } from "../../gen/ep/tower/v1/resources_pb.js";
import { enumOf } from "../../common/vocab.js";
import {
  AuthService,
  CreateTokenResponseSchema,
  ListTokensResponseSchema,
  RevokeTokenResponseSchema,
} from "../../gen/ep/tower/v1/auth_pb.js";
import { UsageError, type Context } from "../context.js";
import { json, table, type Row } from "../output.js";
import { protoJson, tower } from "../tower.js";

const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };

/** "3600", "3600s", "90m", "12h", "30d", "2w" or compound "1d12h" → seconds. */
export function parseTtl(raw: string): number {
  const text = raw.trim();
  if (/^\d+$/.test(text)) return Number(text);
  const re = /(\d+)([smhdw])/gy;
  let total = 0;
  let m: RegExpExecArray | null;
  let consumed = 0;
  while ((m = re.exec(text))) {
    total += Number(m[1]) * UNIT_SECONDS[m[2]];
    consumed = re.lastIndex;
  }
  if (consumed !== text.length || total <= 0)
    throw new UsageError(`--ttl must be a duration like 3600s, 90m, 12h, 30d (got ${JSON.stringify(raw)})`);
  return total;
}

export async function run(ctx: Context): Promise<number> {
  const auth = tower(ctx, AuthService);
  switch (ctx.spec.path[1]) {
    case "create": {
      const ttl = ctx.str("ttl");
      const res = protoJson(
        CreateTokenResponseSchema,
        await auth.createToken({
          name: ctx.required("name"),
          role: enumOf<Role>(RoleSchema, ctx.required("role"), "--role"),
          domainId: ctx.str("domain") ?? "",
          ttlSeconds: BigInt(ttl ? parseTtl(ttl) : 0),
        }),
      );
      if (ctx.json) ctx.out(json(res));
      else {
        const t = res.token as Row;
        ctx.out(`created token ${t.id} (${t.role}${t.expires_at ? `, expires ${t.expires_at}` : ", no expiry"})`);
        ctx.out(`secret (shown once, store it now):\n${res.secret}`);
      }
      return 0;
    }
    case "ls": {
      const res = protoJson(ListTokensResponseSchema, await auth.listTokens({}));
      if (ctx.json) ctx.out(json(res));
      else {
        const { withNames } = await import("../name-book.js");
        const rows = await withNames(ctx, res.tokens as Row[], { domain_id: ["domain", "domain"] });
        ctx.out(
          table(rows, {
            id: "id",
            name: "name",
            role: "role",
            domain: "domain",
            ...(ctx.opts.wide === true ? { domain_id: "domain_id" } : {}),
            expires: "expires_at",
            revoked: "revoked_at",
            last_used: "last_used_at",
          }),
        );
      }
      return 0;
    }
    default: {
      const res = protoJson(RevokeTokenResponseSchema, await auth.revokeToken({ tokenId: ctx.args[0] }));
      ctx.out(ctx.json ? json(res) : `revoked token ${ctx.args[0]}`);
      return 0;
    }
  }
}
