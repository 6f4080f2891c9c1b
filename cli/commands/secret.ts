// ep secret set|ls|rm|grant|revoke. A value is read from stdin or a hidden prompt, never from
// an argument (arguments end up in shell history and in `ps`).
import {
  GrantSecretResponseSchema,
  ListSecretsResponseSchema,
  RevokeSecretResponseSchema,
  SecretService,
  SetSecretResponseSchema,
} from "../../gen/ep/tower/v1/secrets_pb.js";
import { UsageError, type Context } from "../context.js";
import { json, table, type Row } from "../output.js";
import { protoJson, tower } from "../tower.js";

async function readAll(stream: NodeJS.ReadStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** Prompts on the terminal without echoing what is typed. */
function hiddenPrompt(question: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const stdin = process.stdin;
    process.stderr.write(question);
    let value = "";
    stdin.setRawMode(true);
    stdin.resume();
    const onData = (buf: Buffer) => {
      for (const ch of buf.toString("utf8")) {
        if (ch === "\r" || ch === "\n") return done();
        if (ch === "\u0003") return done(new UsageError("cancelled"));
        if (ch === "\u007f" || ch === "\b") value = value.slice(0, -1);
        else value += ch;
      }
    };
    const done = (err?: Error) => {
      stdin.off("data", onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write("\n");
      if (err) reject(err);
      else resolve(value);
    };
    stdin.on("data", onData);
  });
}

async function readValue(name: string): Promise<string> {
  if (process.stdin.isTTY) return hiddenPrompt(`value for ${name} (hidden): `);
  // one trailing newline is the shell's, not the secret's
  return (await readAll(process.stdin)).replace(/\r?\n$/, "");
}

function grantTarget(ctx: Context): { agentId: string; domainId: string } {
  const agentId = ctx.str("agent") ?? "";
  const domainId = ctx.str("domain") ?? "";
  if (!agentId === !domainId)
    throw new UsageError(`ep secret ${ctx.spec.path[1]} needs exactly one of --agent <id> or --domain <id>`);
  return { agentId, domainId };
}

const secretCols = (wide: boolean) => ({
  name: "name",
  domain: "domain",
  ...(wide ? { domain_id: "domain_id" } : {}),
  version: "version",
  agents: "agents",
  domains: "domains",
  updated: "updated_at",
});

export async function run(ctx: Context): Promise<number> {
  const secrets = tower(ctx, SecretService);
  const name = ctx.args[0];
  switch (ctx.spec.path[1]) {
    case "set": {
      const value = await readValue(name);
      if (!value) throw new UsageError("the secret value is empty; pipe it on stdin or type it at the prompt");
      const res = protoJson(
        SetSecretResponseSchema,
        await secrets.setSecret({ name, domainId: ctx.str("domain") ?? "", value }),
      );
      ctx.out(ctx.json ? json(res) : `stored ${name} (version ${(res.secret as Row).version})`);
      return 0;
    }
    case "ls": {
      const res = protoJson(ListSecretsResponseSchema, await secrets.listSecrets({}));
      if (ctx.json) ctx.out(json(res));
      else {
        const { withNames } = await import("../name-book.js");
        const rows = await withNames(ctx, res.secrets as Row[], {
          domain_id: ["domain", "domain"],
          granted_agents: ["agent", "agents"],
          granted_domains: ["domain", "domains"],
        });
        ctx.out(table(rows, secretCols(ctx.opts.wide === true)));
      }
      return 0;
    }
    case "rm": {
      await secrets.deleteSecret({ name });
      ctx.out(ctx.json ? json({ deleted: name }) : `deleted ${name}`);
      return 0;
    }
    case "grant": {
      const res = protoJson(GrantSecretResponseSchema, await secrets.grantSecret({ name, ...grantTarget(ctx) }));
      ctx.out(ctx.json ? json(res) : `granted ${name} to ${ctx.str("agent") ?? `domain ${ctx.str("domain")}`}`);
      return 0;
    }
    default: {
      const res = protoJson(RevokeSecretResponseSchema, await secrets.revokeSecret({ name, ...grantTarget(ctx) }));
      ctx.out(ctx.json ? json(res) : `revoked ${name} from ${ctx.str("agent") ?? `domain ${ctx.str("domain")}`}`);
      return 0;
    }
  }
}
