// ep login / logout / whoami: the saved credentials and who a token is.
import { cliCredentialsFile } from "../../common/paths.js";
import { removeCredentials, writeCredentials } from "../../common/credentials.js";
import { AuthService, WhoAmIResponseSchema } from "../../gen/ep/tower/v1/auth_pb.js";
import { createClient } from "@connectrpc/connect";
import { normalizeUrl, UsageError, type Context } from "../context.js";
import { json, kv } from "../output.js";
import { protoJson, tower, towerTransport } from "../tower.js";

export async function run(ctx: Context): Promise<number> {
  const file = cliCredentialsFile(ctx.env);
  switch (ctx.spec.path[0]) {
    case "login": {
      const rawUrl = ctx.str("url");
      const token = ctx.str("token");
      if (!rawUrl || !token) throw new UsageError("ep login needs --url <url> and --token <token>");
      const url = normalizeUrl(rawUrl);
      if (!/^https?:\/\/[^/]/.test(url))
        throw new UsageError(`--url must be an http(s) URL (got ${JSON.stringify(rawUrl)})`);
      const who = protoJson(
        WhoAmIResponseSchema,
        await createClient(AuthService, towerTransport(url, token)).whoAmI({}),
      );
      await writeCredentials({ url, token }, file);
      ctx.out(
        ctx.json
          ? json({ url, ...who, credentials: file })
          : `logged in to ${url} as ${who.subject} (${who.role}); saved to ${file}`,
      );
      return 0;
    }
    case "logout": {
      const had = await removeCredentials(file);
      ctx.out(
        ctx.json
          ? json({ removed: had, credentials: file })
          : had
            ? `removed ${file}`
            : "not logged in (no saved credentials)",
      );
      return 0;
    }
    default: {
      const who = protoJson(WhoAmIResponseSchema, await tower(ctx, AuthService).whoAmI({}));
      ctx.out(
        ctx.json
          ? json({ url: ctx.url(), ...who })
          : kv({ url: ctx.url(), ...who }, ["url", "subject", "role", "domain_id", "token_id"]),
      );
      return 0;
    }
  }
}
