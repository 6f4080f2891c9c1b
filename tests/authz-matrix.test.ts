// Issue 14: the authorization matrix. Every door of the tower (each REST route as fastify
// registered it, each Connect method of every service, each MCP tool) with every caller, against
// one table (tests/authz-table.ts) that is also printed into docs/security.md. A door missing
// from the table fails the test, so a new route cannot ship without its row.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TOOLS as TOOL_CATALOG } from "../tower/domain/tools/catalog.js";
import {
  CONNECT_METHODS,
  makeFixture,
  MALFORMED_DOORS,
  probeConnect,
  probeMalformed,
  probeRest,
  probeTool,
  REST_ROUTES,
  SERVICES,
  TOOL_NAMES,
  type Fixture,
} from "./authz-probes.js";
import { doorOf, expected, malformedRow, MATRIX, renderMatrix, ROLES, rowOf, type Outcome } from "./authz-table.js";
import { ROOT, startTower, type TestTower } from "./harness.js";

let t: TestTower;
let f: Fixture;

beforeAll(async () => {
  t = await startTower({ env: { EP_SECRET_KEY: "authz" } });
  f = await makeFixture(t);
});

afterAll(async () => {
  const closing = t?.close();
  t?.tower.app.server.closeAllConnections();
  await closing;
});

describe("the authorization matrix", () => {
  it("lists every door: each route, Connect method and MCP tool, and no door that is gone", () => {
    const served = [
      ...new Set(
        t.tower.routes
          .filter((r) => r.method !== "OPTIONS" && !r.url.startsWith("/ep.") && !r.url.startsWith("/grpc.reflection."))
          .map((r) => `${r.method} ${r.url}`),
      ),
    ].sort();
    expect([...Object.keys(MATRIX.rest)].sort()).toEqual(served);
    expect(REST_ROUTES.sort()).toEqual(served);
    const methods = SERVICES.flatMap((s) =>
      s.methods.map((m) => `${s.typeName.replace("ep.tower.v1.", "")}/${m.name}`),
    ).sort();
    expect([...new Set(Object.keys(MATRIX.connect).map(doorOf))].sort()).toEqual(methods);
    expect(Object.keys(MATRIX.connect).sort()).toEqual([...CONNECT_METHODS].sort());
    const tools = TOOL_CATALOG.map((x) => x.name).sort();
    expect(Object.keys(MATRIX.mcp).sort()).toEqual(tools);
    expect([...TOOL_NAMES].sort()).toEqual(tools);
  });

  for (const [kind, probe] of [
    ["rest", probeRest],
    ["connect", probeConnect],
    ["mcp", probeTool],
  ] as const) {
    it(`every ${kind} door lets in exactly the callers the table says`, async () => {
      const mismatches: string[] = [];
      for (const [door, row] of Object.entries(MATRIX[kind])) {
        const got = {} as Record<(typeof ROLES)[number], Outcome>;
        for (const role of [...ROLES].reverse()) {
          const o = await probe(f, door, role);
          if (o === "invalid")
            mismatches.push(`${door} as ${role}: the probe was refused as invalid input; fix the probe`);
          got[role] = o === "allow" ? "allow" : "deny";
        }
        if (rowOf(got) !== row) mismatches.push(`${door}: table ${row}, tower ${rowOf(got)} (${ROLES.join(" ")})`);
        expect(expected(row)).toBeDefined();
      }
      expect(mismatches).toEqual([]);
    }, 60_000);
  }

  for (const kind of ["rest", "connect", "mcp"] as const) {
    it(`a malformed body on a ${kind} door: 403 for the roles that may not call it, 400 for the others`, async () => {
      const mismatches: string[] = [];
      for (const door of MALFORMED_DOORS[kind]) {
        const got = {} as Record<(typeof ROLES)[number], Outcome>;
        for (const role of ROLES) {
          const o = await probeMalformed(f, kind, door, role);
          if (o === "invalid") mismatches.push(`${door} as ${role}: neither 403 nor 400 for a malformed body`);
          got[role] = o === "allow" ? "allow" : "deny";
        }
        const row = malformedRow(MATRIX[kind], door);
        if (rowOf(got) !== row)
          mismatches.push(`${door} (malformed): table ${row}, tower ${rowOf(got)} (${ROLES.join(" ")})`);
      }
      expect(mismatches).toEqual([]);
    }, 60_000);
  }

  it("docs/security.md carries the current table", () => {
    expect(readFileSync(join(ROOT, "docs", "security.md"), "utf8")).toContain(renderMatrix());
  });
});
