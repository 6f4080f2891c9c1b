// Serves the built web console (dist/web, made by `npm run build`) at /ui/. Hashed assets are
// cached for a year, index.html is revalidated every time, any other /ui/* path without a file
// extension gets index.html (the console routes on the client), and nothing outside the build
// directory is ever read. The console's own data comes from the authenticated API; these files
// are public.
import { existsSync, promises as fs } from "node:fs";
import { dirname, extname, join, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { EpError } from "../../../common/errors.js";

export const CONSOLE_PREFIX = "/ui/";

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".map": "application/json",
  ".webmanifest": "application/manifest+json",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".ico": "image/x-icon",
  ".woff": "font/woff",
  ".woff2": "font/woff2",
  ".ttf": "font/ttf",
  ".txt": "text/plain; charset=utf-8",
  ".wasm": "application/wasm",
};
const COMPRESSIBLE = new Set([".html", ".js", ".mjs", ".css", ".json", ".map", ".svg", ".txt", ".webmanifest"]);

export const IMMUTABLE = "public, max-age=31536000, immutable";
export const REVALIDATE = "no-cache";

// Vite names built assets `<name>-<hash>.<ext>` under assets/.
const HASHED_ASSET = /^assets\/(?:.+\/)?[^/]+-[A-Za-z0-9_-]{8,}\.[a-z0-9]+$/;

/**
 * The console's pages run only the bundle shipped beside them: no inline or remote script, no
 * plugins, no framing. Inline styles stay allowed for components that position elements
 * (e.g. a terminal); they cannot run code.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

/** dist/web of the installed package: the first ancestor of this module holding package.json. */
export function defaultConsoleDir(from: string = dirname(fileURLToPath(import.meta.url))): string {
  let dir = from;
  for (;;) {
    if (existsSync(join(dir, "package.json"))) return join(dir, "dist", "web");
    const up = dirname(dir);
    if (up === dir) return join(from, "dist", "web");
    dir = up;
  }
}

export interface ConsoleRoutesOptions {
  /** the built console; default: dist/web of this package */
  dir?: string;
}

interface Cached {
  mtimeMs: number;
  size: number;
  body: Buffer;
  gzip?: Buffer;
  etag: string;
}

/** Maps the part of the URL after /ui/ to a file path inside root, or undefined if it escapes. */
export function resolveInside(root: string, urlPath: string): string | undefined {
  let rel: string;
  try {
    rel = decodeURIComponent(urlPath);
  } catch {
    return undefined;
  }
  if (rel.includes("\0") || rel.includes("\\")) return undefined;
  const segments = rel.split("/");
  if (segments.some((s) => s === ".." || s === ".")) return undefined;
  const full = resolve(root, ...segments.filter((s) => s !== ""));
  return full === root || full.startsWith(root + sep) ? full : undefined;
}

export function registerConsoleRoutes(app: FastifyInstance, opts: ConsoleRoutesOptions = {}): void {
  const root = resolve(opts.dir ?? defaultConsoleDir());
  const cache = new Map<string, Cached>();

  async function load(file: string): Promise<Cached | undefined> {
    let st;
    try {
      st = await fs.stat(file);
    } catch {
      return undefined;
    }
    if (!st.isFile()) return undefined;
    const hit = cache.get(file);
    if (hit && hit.mtimeMs === st.mtimeMs && hit.size === st.size) return hit;
    const body = await fs.readFile(file);
    const entry: Cached = {
      mtimeMs: st.mtimeMs,
      size: st.size,
      body,
      etag: `W/"${st.size.toString(16)}-${Math.floor(st.mtimeMs).toString(16)}"`,
    };
    if (COMPRESSIBLE.has(extname(file)) && body.length > 1024) entry.gzip = gzipSync(body, { level: 9 });
    cache.set(file, entry);
    return entry;
  }

  function send(req: FastifyRequest, reply: FastifyReply, file: string, entry: Cached, rel: string): FastifyReply {
    const ext = extname(file);
    const isIndex = rel === "index.html";
    void reply
      .header("content-type", CONTENT_TYPES[ext] ?? "application/octet-stream")
      .header("cache-control", HASHED_ASSET.test(rel) ? IMMUTABLE : REVALIDATE)
      .header("etag", entry.etag)
      .header("x-content-type-options", "nosniff");
    if (isIndex || ext === ".html") {
      void reply
        .header("content-security-policy", CONSOLE_CSP)
        .header("referrer-policy", "no-referrer")
        .header("x-frame-options", "DENY");
    }
    if (entry.gzip) void reply.header("vary", "accept-encoding");
    if (req.headers["if-none-match"] === entry.etag) return reply.code(304).send();
    const acceptsGzip = /\bgzip\b/.test(String(req.headers["accept-encoding"] ?? ""));
    if (entry.gzip && acceptsGzip) return reply.header("content-encoding", "gzip").send(entry.gzip);
    return reply.send(entry.body);
  }

  async function serve(req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const path = req.url.split("?", 1)[0];
    if (path === "/ui") return reply.redirect(CONSOLE_PREFIX, 302);
    const indexFile = join(root, "index.html");
    const index = await load(indexFile);
    if (!index) {
      throw new EpError(
        "unavailable",
        "the web console is not built: run `npm run build` (it writes dist/web), then reload",
        { dir: root },
      );
    }
    const rel = path.slice(CONSOLE_PREFIX.length);
    if (rel === "" || rel === "index.html") return send(req, reply, indexFile, index, "index.html");
    const file = resolveInside(root, rel);
    if (!file) throw new EpError("not_found", `no console file ${path}`);
    const entry = await load(file);
    if (entry)
      return send(
        req,
        reply,
        file,
        entry,
        file
          .slice(root.length + 1)
          .split(sep)
          .join("/"),
      );
    // a client-side route (/ui/missions, /ui/login) gets the app; a missing file stays missing
    const last = rel.split("/").pop() ?? "";
    if (rel.startsWith("assets/") || last.includes(".")) throw new EpError("not_found", `no console file ${path}`);
    return send(req, reply, indexFile, index, "index.html");
  }

  app.get("/ui", serve);
  app.get("/ui/*", serve);
}
