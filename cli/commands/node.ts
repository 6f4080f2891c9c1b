// ep agent node register --hostname <h>: NodeService.RegisterNode, then the node identity file.
// ep node reload <node_id>: NodeService.ReloadNodeConfig (the node reloads its config files).
import { constants } from "node:fs";
import { access, stat } from "node:fs/promises";
import { dirname } from "node:path";
import { EpError } from "../../common/errors.js";
import { writeNodeIdentity, type NodeIdentity } from "../../common/node-identity.js";
import { nodeFile } from "../../common/paths.js";
import { NodeService, ReloadStatus, ReloadStatusSchema } from "../../gen/ep/tower/v1/fleet_pb.js";
import { enumWord } from "../../common/vocab.js";
import { WorkService } from "../../gen/ep/tower/v1/work_pb.js";
import { UsageError, type Context } from "../context.js";
import { withHint } from "../fail.js";
import { json } from "../output.js";
import { tower } from "../tower.js";
import { durationFromMs } from "@bufbuild/protobuf/wkt";

/** Fails early (before the tower issues an identity) when the file cannot be written. */
export async function checkWritable(path: string): Promise<void> {
  // the file itself when it exists, else its nearest existing ancestor, which must be a writable directory
  const probe = async (p: string, isFile: boolean): Promise<string | undefined> => {
    try {
      const st = await stat(p);
      if (!isFile && !st.isDirectory()) return `${p} is not a directory`;
      await access(p, constants.W_OK);
      return undefined;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "ENOTDIR") {
        const parent = dirname(p);
        return parent === p ? `${p} does not exist` : probe(parent, false);
      }
      return code === "EACCES" || code === "EPERM" || code === "EROFS"
        ? `${p} is not writable by this user`
        : (err as Error).message;
    }
  };
  const why = await probe(path, true);
  if (why) {
    throw withHint(
      new EpError("forbidden", `cannot write the node identity file ${path}: ${why}`, { file: path }),
      `run it with sudo, or choose a writable path with EP_NODE_FILE=<path> (epd must then get the same EP_NODE_FILE)`,
    );
  }
}

/**
 * Domain ids for ids or names (a name must be unique; "*" means all domains). The tower checks
 * the ids again; this gives a newcomer's `--domain demo` its meaning.
 */
export async function resolveDomains(ctx: Context, refs: readonly string[]): Promise<string[]> {
  if (!refs.length || refs.includes("*")) return refs.includes("*") ? ["*"] : [];
  const all = (await tower(ctx, WorkService).listDomains({})).domains;
  return refs.map((ref) => {
    if (all.some((d) => d.id === ref)) return ref;
    const named = all.filter((d) => d.name === ref);
    if (named.length === 1) return named[0].id;
    if (named.length > 1)
      throw new UsageError(
        `--domain ${ref} is ambiguous: ${named.map((d) => d.id).join(", ")} ` +
          `are all named ${JSON.stringify(ref)}; give the id`,
      );
    throw new EpError(
      "domain_not_found",
      `domain ${ref} does not exist (no domain has this id or name; 'ep domain ls' lists them)`,
      { field: "domain" },
    );
  });
}

export const domainsText = (domains: readonly string[]): string =>
  domains.includes("*") || !domains.length ? "* (all domains)" : domains.join(", ");

export async function registerNode(
  ctx: Context,
  hostname: string,
  path: string,
  domainIds: string[] = [],
): Promise<NodeIdentity> {
  await checkWritable(path);
  const res = await tower(ctx, NodeService).registerNode({ hostname, domainIds: domainIds.filter((d) => d !== "*") });
  const identity: NodeIdentity = {
    node_id: res.node!.id,
    hostname: res.node!.hostname,
    token: res.token,
    tower_url: res.towerUrl || ctx.url(),
  };
  try {
    await writeNodeIdentity(identity, path);
  } catch (err) {
    if (err instanceof EpError) throw err;
    throw withHint(
      new EpError("forbidden", `cannot write ${path}: ${(err as Error).message}`, { file: path }),
      "use sudo or EP_NODE_FILE=<writable path>",
    );
  }
  return identity;
}

/**
 * ep node reload <node_id>: ok → 0; the node found errors → 2 (like `ep agent cron reload`); no answer in time → 0 with
 * a note.
 */
async function reload(ctx: Context): Promise<number> {
  const raw = ctx.str("wait");
  const waitMs = raw === undefined ? undefined : Number(raw);
  if (waitMs !== undefined && (!Number.isInteger(waitMs) || waitMs < 0 || waitMs > 60_000))
    throw new UsageError(`--wait must be milliseconds between 0 and 60000 (got ${JSON.stringify(raw)})`);
  const nodeId = ctx.args[0]!;
  const res = await tower(ctx, NodeService).reloadNodeConfig({
    nodeId,
    wait: waitMs === undefined ? undefined : durationFromMs(waitMs),
  });
  const errors = res.errors.map((e) => ({
    file: e.file,
    line: e.line,
    field: e.field,
    item: e.item,
    message: e.message,
  }));
  if (ctx.json) {
    ctx.out(
      json({
        node_id: nodeId,
        request_id: res.requestId,
        status: enumWord(ReloadStatusSchema, res.status),
        results: res.results,
        errors,
        event_id: Number(res.eventId),
      }),
    );
  } else if (res.status === ReloadStatus.SENT) {
    ctx.out(
      `config_reload sent to ${nodeId} (request ${res.requestId}); no answer yet — ` +
        `its config.reload event will say how it went (ep events tail --type matrix)`,
    );
  } else {
    const lines = [
      `${nodeId}: configuration reload ${res.status === ReloadStatus.OK ? "ok" : "failed"}`,
      ...res.results.map((r) => `  ${r}`),
    ];
    for (const e of errors)
      lines.push(
        `  ${e.file}${e.line ? `, line ${e.line}` : ""}${e.item ? `, ${e.item}` : ""}` +
          `${e.field ? `, field ${e.field}` : ""}: ${e.message}`,
      );
    ctx.out(lines.join("\n"));
  }
  return res.status === ReloadStatus.FAILED ? 2 : 0;
}

/** ep node domains set <node> (--domain <id|name>… | --all): NodeService.SetNodeDomains. */
async function setDomains(ctx: Context): Promise<number> {
  const refs = ctx.list("domain");
  const all = ctx.opts.all === true;
  if (all === refs.length > 0) throw new UsageError("give --domain <id|name> (repeatable) or --all");
  const domainIds = all ? [] : await resolveDomains(ctx, refs);
  const res = await tower(ctx, NodeService).setNodeDomains({
    nodeId: ctx.args[0]!,
    domainIds: domainIds.filter((d) => d !== "*"),
    all: all || domainIds.includes("*"),
  });
  const node = res.node!;
  ctx.out(
    ctx.json
      ? json({ node_id: node.id, hostname: node.hostname, domains: node.domains })
      : `node ${node.id} (${node.hostname}) now serves ${domainsText(node.domains)}`,
  );
  return 0;
}

export async function run(ctx: Context): Promise<number> {
  if (ctx.spec.path.join(" ") === "node reload") return reload(ctx);
  if (ctx.spec.path.join(" ") === "node domains set") return setDomains(ctx);
  const hostname = ctx.str("hostname");
  if (!hostname) throw new UsageError("ep agent node register needs --hostname <hostname>");
  if (!/^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$/.test(hostname))
    throw new UsageError(
      `--hostname must be a host name (letters, digits, dots, dashes; got ${JSON.stringify(hostname)})`,
    );
  const path = nodeFile(ctx.env);
  const domains = await resolveDomains(ctx, ctx.list("domain"));
  const id = await registerNode(ctx, hostname, path, domains);
  const serves = domains.length && !domains.includes("*") ? domains : ["*"];
  ctx.out(
    ctx.json
      ? json({ node_id: id.node_id, hostname: id.hostname, tower_url: id.tower_url, file: path, domains: serves })
      : `registered node ${id.node_id} (${id.hostname}) with ${id.tower_url}; identity ` +
          `written to ${path} (0600)\nserves ${domainsText(serves)}` +
          `${serves.includes("*") ? " — narrow it with --domain, or later with 'ep node domains set'" : ""}`,
  );
  return 0;
}
