// REST answers in HTTP's own terms (issue 18, point 6): a known path with another method is 405
// with Allow (OPTIONS: 204 with Allow), a refused credential carries WWW-Authenticate, and a body
// or query the route cannot take is a 400 naming what was wrong — never silently read as something else.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTower, type TestTower } from "./harness.js";

let t: TestTower;
let domainId = "";
let missionId = "";

beforeAll(async () => {
  t = await startTower();
  domainId = (await t.api("POST", "/domains", { name: "rest" })).body.domain.id;
  missionId = (await t.api("POST", `/domains/${domainId}/m`, { title: "m" })).body.mission.id;
});
afterAll(() => t?.close());

const raw = (method: string, path: string, init: { body?: string; type?: string; token?: string | null } = {}) =>
  fetch(t.url + path, {
    method,
    headers: {
      ...(init.token === null ? {} : { authorization: `Bearer ${init.token ?? t.adminToken}` }),
      ...(init.type ? { "content-type": init.type } : {}),
    },
    body: init.body,
  });

describe("REST protocol", () => {
  it("answers a known path asked with another method with 405 and Allow, and OPTIONS with 204 and Allow", async () => {
    const put = await raw("PUT", "/domains");
    expect(put.status).toBe(405);
    expect(put.headers.get("allow")).toBe("GET, HEAD, POST");
    const body = (await put.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("method_not_allowed");
    expect(body.error.message).toContain("/domains does not serve PUT");

    // a pattern with a parameter, and a trailing slash
    const del = await raw("DELETE", `/domains/${domainId}/`);
    expect(del.status).toBe(405);
    expect(del.headers.get("allow")).toBe("GET, HEAD");

    const options = await raw("OPTIONS", `/domains/${domainId}/m`);
    expect(options.status).toBe(204);
    expect(options.headers.get("allow")).toBe("GET, HEAD, POST, OPTIONS");

    // an unknown path stays 404
    const nowhere = await raw("PUT", "/nowhere");
    expect(nowhere.status).toBe(404);
    expect(((await nowhere.json()) as { error: { code: string } }).error.code).toBe("route_not_found");
  });

  it("sends WWW-Authenticate: Bearer on 401, with error=invalid_token when a credential was sent", async () => {
    const none = await raw("GET", "/domains", { token: null });
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toBe('Bearer realm="ep"');
    const bad = await raw("GET", "/domains", { token: "ept_not-a-token" });
    expect(bad.status).toBe(401);
    expect(bad.headers.get("www-authenticate")).toBe('Bearer realm="ep", error="invalid_token"');
    // the Connect face too
    const connect = await fetch(`${t.url}/ep.tower.v1.WorkService/ListDomains`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(connect.status).toBe(401);
    expect(connect.headers.get("www-authenticate")).toBe('Bearer realm="ep"');
  });

  it("refuses a body that is not a JSON object, naming what it got, and stores nothing", async () => {
    const before = (await t.api("GET", `/domains/${domainId}/m`)).body.missions.length;
    for (const [body, type, got] of [
      ["[]", "application/json", "an array"],
      ["null", "application/json", "null"],
      ['{"title":"x"}', "text/plain", "a text/plain body"],
    ] as const) {
      const res = await raw("POST", `/domains/${domainId}/m`, { body, type });
      expect(res.status, `${type} ${body}`).toBe(400);
      const err = ((await res.json()) as { error: { code: string; message: string } }).error;
      expect(err.code).toBe("invalid_argument");
      expect(err.message).toContain(`must be a JSON object sent as Content-Type: application/json (got ${got})`);
    }
    expect((await t.api("GET", `/domains/${domainId}/m`)).body.missions.length).toBe(before);
    // an object still works, and an empty body on a route without required fields is no body
    expect(
      (await raw("POST", `/domains/${domainId}/m`, { body: '{"title":"ok"}', type: "application/json" })).status,
    ).toBe(201);
  });

  it("names an unknown or malformed query parameter instead of ignoring it", async () => {
    const typo = await raw("GET", `/work/missions/${missionId}/tasks?stauts=queued`);
    expect(typo.status).toBe(400);
    const e1 = ((await typo.json()) as { error: { message: string; details: { field: string } } }).error;
    expect(e1.message).toContain('unknown query parameter "stauts"');
    expect(e1.message).toContain("kind, status, limit");
    expect(e1.details.field).toBe("stauts");

    const nan = await raw("GET", `/work/missions/${missionId}/tasks?limit=abc`);
    expect(nan.status).toBe(400);
    expect(((await nan.json()) as { error: { message: string } }).error.message).toBe(
      'query parameter "limit" must be an integer (got "abc")',
    );

    const twice = await raw("GET", `/work/missions/${missionId}/tasks?status=queued&status=failed`);
    expect(twice.status).toBe(400);

    const none = await raw("GET", `/domains/${domainId}?x=1`);
    expect(none.status).toBe(400);
    expect(((await none.json()) as { error: { message: string } }).error.message).toContain("takes none");

    const ok = await raw("GET", `/work/missions/${missionId}/tasks?status=queued&limit=5`);
    expect(ok.status).toBe(200);
  });
});
