// An upgrade offer the tower does not take (`Upgrade: h2c`, as `curl --http2` sends on http://)
// is ignored: the request is answered as the HTTP/1.1 request it is (issue 18). An unknown
// WebSocket path is still refused with the JSON error.
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTower, type TestTower } from "./harness.js";

let t: TestTower;
beforeAll(async () => {
  t = await startTower();
});
afterAll(async () => {
  await t?.close();
});

function get(path: string, headers: Record<string, string>, body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(path, t.url);
    const req = request(
      { host: u.hostname, port: u.port, path: u.pathname, method: body ? "POST" : "GET", headers },
      (res) => {
        let text = "";
        res
          .setEncoding("utf8")
          .on("data", (d: string) => (text += d))
          .on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on("upgrade", (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 0, body: "(upgraded)" });
    });
    req.on("error", reject);
    req.end(body);
  });
}

const h2c = { connection: "Upgrade, HTTP2-Settings", upgrade: "h2c", "http2-settings": "AAMAAABkAARAAAAAAAIAAAAA" };

describe("upgrade offers", () => {
  it("answers a request offering h2c as plain HTTP/1.1: health, an authenticated route, a 401", async () => {
    expect(await get("/healthz", h2c)).toEqual({ status: 200, body: '{"status":"ok"}' });
    const listed = await get("/domains", { ...h2c, authorization: `Bearer ${t.adminToken}` });
    expect(listed.status).toBe(200);
    expect(JSON.parse(listed.body)).toHaveProperty("domains");
    const anonymous = await get("/domains", h2c);
    expect(anonymous.status).toBe(401);
  });

  it(
    "refuses a body sent with an upgrade offer with a " + "clear 400, and an unknown WebSocket path with a 404",
    async () => {
      const withBody = await get(
        "/domains",
        { ...h2c, authorization: `Bearer ${t.adminToken}`, "content-type": "application/json", "content-length": "2" },
        "{}",
      );
      expect(withBody.status).toBe(400);
      expect(JSON.parse(withBody.body).error.message).toContain("without 'Upgrade: h2c'");
      const ws = await get("/nope", {
        connection: "Upgrade",
        upgrade: "websocket",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
        "sec-websocket-version": "13",
      });
      expect(ws.status).toBe(404);
      expect(JSON.parse(ws.body).error.code).toBe("route_not_found");
    },
  );
});
