// The node identity file (/etc/ep/node.json, EP_NODE_FILE): written by `ep agent node register`
// from NodeService.RegisterNode, read by `epd run`. Shared by the CLI and the daemon, so it lives here.
import { chmod, mkdir, readFile, rename, stat, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { EpError } from "./errors.js";
import { nodeFile } from "./paths.js";

export interface NodeIdentity {
  node_id: string;
  hostname: string;
  /** the node JWT; every daemon call to the tower carries it as a Bearer token */
  token: string;
  /** the tower URL the node was registered with */
  tower_url: string;
}

const FIELDS = ["node_id", "hostname", "token", "tower_url"] as const;

/** Checks the JSON text of a node identity file; `source` names the file in errors. */
export function parseNodeIdentity(text: string, source = "node.json"): NodeIdentity {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new EpError(
      "config_invalid",
      `${source} is not valid JSON (${(err as Error).message}); register ` +
        `the node again with 'ep agent node register --hostname <host>'`,
      { file: source },
    );
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) {
    throw new EpError("config_invalid", `${source} must hold a JSON object with ${FIELDS.join(", ")}`, {
      file: source,
    });
  }
  const d = doc as Record<string, unknown>;
  for (const f of FIELDS) {
    if (typeof d[f] !== "string" || !(d[f] as string).trim()) {
      throw new EpError("config_invalid", `${source}: field ${f} is missing or not a non-empty string`, {
        file: source,
        field: f,
      });
    }
  }
  if (!/^https?:\/\//.test(d.tower_url as string))
    throw new EpError("config_invalid", `${source}: tower_url must be an http(s) URL`, {
      file: source,
      field: "tower_url",
    });
  return {
    node_id: d.node_id as string,
    hostname: d.hostname as string,
    token: d.token as string,
    tower_url: (d.tower_url as string).replace(/\/+$/, ""),
  };
}

/** Reads and checks the identity file; a missing or unreadable file is `config_invalid` saying how to create it. */
export async function readNodeIdentity(path: string = nodeFile()): Promise<NodeIdentity> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === "ENOENT"
        ? "does not exist"
        : code === "EACCES"
          ? "is not readable by this user"
          : (err as Error).message;
    throw new EpError(
      "config_invalid",
      `the node identity file ${path} ${why}; register this node with 'ep agent ` +
        `node register --hostname <host>' (EP_NODE_FILE chooses another path)`,
      { file: path },
    );
  }
  return parseNodeIdentity(text, path);
}

/**
 * mkdir -p, one level at a time: Node's recursive mkdir spins forever on paths under
 * pseudo file systems such as /proc, where a level reports ENOENT however often it is made.
 */
async function ensureDir(dir: string): Promise<void> {
  const missing: string[] = [];
  for (let d = dir; ; d = dirname(d)) {
    try {
      await stat(d);
      break;
    } catch {
      missing.push(d);
      if (dirname(d) === d) break;
    }
  }
  for (const d of missing.reverse()) {
    await mkdir(d).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== "EEXIST") throw err;
    });
  }
}

/** Writes the identity file atomically with mode 0600 (the token is a credential). */
export async function writeNodeIdentity(identity: NodeIdentity, path: string = nodeFile()): Promise<void> {
  const checked = parseNodeIdentity(JSON.stringify(identity), path);
  await ensureDir(dirname(path));
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, JSON.stringify(checked, null, 2) + "\n", { mode: 0o600 });
  await chmod(tmp, 0o600);
  await rename(tmp, path);
}
