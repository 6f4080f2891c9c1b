// The console's static files over real HTTP: types, caching, SPA fallback, no escape from dist/web.
import Fastify, { type FastifyInstance } from "fastify";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EpError } from "../../../common/errors.js";
import { CONSOLE_CSP, IMMUTABLE, defaultConsoleDir, registerConsoleRoutes, resolveInside } from "./console-routes.js";

const tmp = mkdtempSync(join(tmpdir(), "ep-ui-"));
const dist = join(tmp, "dist", "web");
const bigJs = `console.log(${JSON.stringify("x".repeat(5000))});`;

function makeApp(dir: string): FastifyInstance {
  const app = Fastify({ routerOptions: { ignoreTrailingSlash: true } } as Parameters<
    typeof Fastify
  >[0]) as unknown as FastifyInstance;
  app.setErrorHandler((err, _req, reply) => {
    const ep = err instanceof EpError ? err : new EpError("internal");
    void reply.code(ep.httpStatus).send(ep.toJSON());
  });
  registerConsoleRoutes(app, { dir });
  return app;
}

let app: FastifyInstance;
let base: string;

/** A raw GET whose path is sent exactly as written (fetch would normalise `..`). */
function rawGet(path: string): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ hostname, port, path, method: "GET" }, (res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body += d.toString()));
      res.on("end", () => resolve({ status: res.statusCode!, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

beforeAll(async () => {
  mkdirSync(join(dist, "assets"), { recursive: true });
  writeFileSync(join(dist, "index.html"), "<!doctype html><title>EP console</title>");
  writeFileSync(join(dist, "assets", "index-AbCd1234.js"), bigJs);
  writeFileSync(join(dist, "assets", "index-Zz9_x-12.css"), "body{}");
  writeFileSync(join(dist, "favicon.svg"), "<svg/>");
  writeFileSync(join(tmp, "dist", "secret.txt"), "outside");
  writeFileSync(join(tmp, "package.json"), "{}");
  app = makeApp(dist);
  await app.listen({ host: "127.0.0.1", port: 0 });
  base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
});
afterAll(async () => {
  await app?.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe("console static files", () => {
  it("serves index.html at /ui/ with no-cache and a strict CSP", async () => {
    const res = await fetch(`${base}/ui/`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    expect(res.headers.get("content-security-policy")).toBe(CONSOLE_CSP);
    expect(res.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(await res.text()).toContain("EP console");
  });

  it("redirects /ui to /ui/", async () => {
    const res = await fetch(`${base}/ui`, { redirect: "manual" });
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/ui/");
  });

  it("caches hashed assets for a year, immutable, with the right types", async () => {
    const js = await fetch(`${base}/ui/assets/index-AbCd1234.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(js.headers.get("cache-control")).toBe(IMMUTABLE);
    expect(await js.text()).toBe(bigJs);
    const css = await fetch(`${base}/ui/assets/index-Zz9_x-12.css`);
    expect(css.headers.get("content-type")).toBe("text/css; charset=utf-8");
    expect(css.headers.get("cache-control")).toBe(IMMUTABLE);
    const svg = await fetch(`${base}/ui/favicon.svg`);
    expect(svg.headers.get("content-type")).toBe("image/svg+xml");
    expect(svg.headers.get("cache-control")).toBe("no-cache");
  });

  it("gzips text assets for clients that accept it and answers 304 to a matching ETag", async () => {
    const { hostname, port } = new URL(base);
    const gz = await new Promise<{ headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
      const req = request(
        { hostname, port, path: "/ui/assets/index-AbCd1234.js", headers: { "accept-encoding": "gzip" } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (d: Buffer) => chunks.push(d));
          res.on("end", () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
        },
      );
      req.on("error", reject);
      req.end();
    });
    expect(gz.headers["content-encoding"]).toBe("gzip");
    expect(gunzipSync(gz.body).toString()).toBe(bigJs);
    const first = await fetch(`${base}/ui/assets/index-AbCd1234.js`);
    const etag = first.headers.get("etag")!;
    const again = await fetch(`${base}/ui/assets/index-AbCd1234.js`, { headers: { "if-none-match": etag } });
    expect(again.status).toBe(304);
  });

  it("answers client-side routes with index.html and missing files with 404", async () => {
    for (const path of ["/ui/missions", "/ui/login", "/ui/agents/", "/ui/a/b/c"]) {
      const res = await fetch(base + path);
      expect(res.status, path).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
      expect(res.headers.get("cache-control")).toBe("no-cache");
    }
    const missingAsset = await fetch(`${base}/ui/assets/index-deadbeef.js`);
    expect(missingAsset.status).toBe(404);
    expect((await missingAsset.json()).error.code).toBe("not_found");
    expect((await fetch(`${base}/ui/nope.png`)).status).toBe(404);
  });

  it("never reads outside dist/web", async () => {
    for (const path of [
      "/ui/../secret.txt",
      "/ui/..%2fsecret.txt",
      "/ui/%2e%2e/secret.txt",
      "/ui/assets/..%2f..%2fsecret.txt",
      "/ui/..%5csecret.txt",
      "/ui/%00index.html",
      "/ui/%zz",
    ]) {
      const res = await rawGet(path);
      expect(res.body, path).not.toContain("outside");
      expect([400, 404], path).toContain(res.status);
    }
    expect(resolveInside("/srv/web", "../x")).toBeUndefined();
    expect(resolveInside("/srv/web", "a/../../x")).toBeUndefined();
    expect(resolveInside("/srv/web", "assets/a.js")).toBe("/srv/web/assets/a.js");
  });

  it("answers 503 telling to run the build when dist/web is missing", async () => {
    const bare = makeApp(join(tmp, "nowhere"));
    try {
      const res = await bare.inject({ method: "GET", url: "/ui/" });
      expect(res.statusCode).toBe(503);
      const body = res.json();
      expect(body.error.code).toBe("unavailable");
      expect(body.error.message).toContain("npm run build");
    } finally {
      await bare.close();
    }
  });

  it("finds dist/web beside the package.json above it", () => {
    expect(defaultConsoleDir(join(tmp, "dist", "chunks"))).toBe(join(tmp, "dist", "web"));
  });
});
