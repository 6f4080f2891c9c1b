// Issue 18, point 8: /openapi.json is a valid OpenAPI 3.1 document (checked by an independent
// validator from npm) that lists every REST route the tower serves, with the request and response
// fields of the contract. A route added without a description fails here.
import { Validator } from "@seriousme/openapi-schema-validator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTower, type TestTower } from "./harness.js";

let t: TestTower;
let doc: {
  openapi: string;
  paths: Record<
    string,
    Record<
      string,
      {
        security?: unknown[];
        requestBody?: { content: Record<string, { schema: { properties?: Record<string, unknown> } }> };
      }
    >
  >;
  components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
};
beforeAll(async () => {
  t = await startTower();
  // served without a credential, like the schema reflection serves
  const res = await fetch(`${t.url}/openapi.json`);
  expect(res.status).toBe(200);
  doc = (await res.json()) as typeof doc;
});
afterAll(async () => {
  await t?.close();
});

describe("/openapi.json", () => {
  it("validates as OpenAPI 3.1", async () => {
    const result = await new Validator().validate(structuredClone(doc) as never);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(doc.openapi).toBe("3.1.0");
    // and the validator is not a formality: the same document with a broken response is refused
    const broken = structuredClone(doc) as unknown as { paths: Record<string, Record<string, { responses: unknown }>> };
    broken.paths["/domains"].get.responses = { "200": { content: {} } }; // a response without its description
    expect((await new Validator().validate(broken as never)).valid).toBe(false);
  });

  it("lists every REST route the tower serves, and no route it does not", () => {
    const served = new Set(
      t.tower.routes
        // RPC procedures are in proto/, not here
        .filter((r) => r.method !== "OPTIONS" && !/^\/[a-z][\w.]*\.[A-Z]\w*\/\w+$/.test(r.url))
        .map((r) => `${r.method} ${r.url.replace(/:(\w+)/g, "{$1}").replace(/\*$/, "{path}")}`),
    );
    const described = new Set(
      Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`)),
    );
    expect([...served].filter((r) => !described.has(r)).sort()).toEqual([]);
    expect([...described].filter((r) => !served.has(r)).sort()).toEqual([]);
  });

  it("describes bodies and results with the contract's snake_case fields", () => {
    const create = doc.paths["/work/missions/{mission_id}/tasks"].post;
    const body = create.requestBody!.content["application/json"].schema.properties!;
    expect(Object.keys(body)).toEqual(
      expect.arrayContaining(["title", "claim_policy", "capabilities", "max_attempts", "input"]),
    );
    // the path parameter and the route's fixed kind are not body fields
    expect(body).not.toHaveProperty("mission_id");
    expect(body).not.toHaveProperty("kind");
    expect(Object.keys(doc.components.schemas["ep.tower.v1.Task"].properties!)).toEqual(
      expect.arrayContaining(["id", "status", "lease_expires_at", "created_at"]),
    );
    // Struct fields (a task's input, its usage) are open JSON objects, not objects without properties
    expect(doc.components.schemas["ep.tower.v1.Task"].properties!.input).toEqual({
      type: "object",
      additionalProperties: true,
    });
    expect(doc.paths["/healthz"].get.security).toEqual([]);
    expect(doc.paths["/domains"].get.security).toBeUndefined();
  });
});
