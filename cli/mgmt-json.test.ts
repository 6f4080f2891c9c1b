// mgmtJson renames keys without protobuf: prove it matches the proto field names of every mgmt.sock
// response, and that the only free-form (Struct/Value) fields are the ones it leaves alone.
import { create, toJson, type DescMessage } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import * as pb from "../gen/ep/daemon/v1/mgmt_pb.js";
import {
  DaemonService,
  AgentService,
  CronService,
  SuperviseService,
  ToolService,
} from "../gen/ep/daemon/v1/mgmt_pb.js";
import { mgmtJson, OPAQUE_FIELDS, snakeName } from "./mgmt-json.js";

const FREE_FORM = new Set(["google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"]);

/** Every (message, field) reachable from a schema, and the free-form fields on the way. */
function walk(
  schema: DescMessage,
  path: string,
  seen: Set<string>,
  out: { names: [string, string, string][]; free: string[] },
): void {
  if (seen.has(schema.typeName) || FREE_FORM.has(schema.typeName)) return;
  seen.add(schema.typeName);
  for (const f of schema.fields) {
    out.names.push([`${path}.${f.name}`, f.jsonName, f.name]);
    const msg =
      f.fieldKind === "message" || (f.fieldKind === "list" && f.listKind === "message")
        ? f.message
        : f.fieldKind === "map" && f.mapKind === "message"
          ? f.message
          : undefined;
    if (f.fieldKind === "map") out.free.push(`${path}.${f.name} (map)`);
    if (msg && FREE_FORM.has(msg.typeName)) out.free.push(`${path}.${f.name}`);
    else if (msg) walk(msg, `${path}.${f.name}`, seen, out);
  }
}

const services = {
  daemon: DaemonService,
  agent: AgentService,
  cron: CronService,
  supervise: SuperviseService,
  tool: ToolService,
};

describe("mgmtJson", () => {
  it("gives each mgmt.sock response's proto field names; free-form fields are exactly OPAQUE_FIELDS", () => {
    const free: string[] = [];
    let methods = 0;
    for (const [prefix, svc] of Object.entries(services)) {
      for (const m of svc.methods) {
        methods++;
        const method = `${prefix}.${m.localName}`;
        const out = { names: [] as [string, string, string][], free: [] as string[] };
        walk(m.output, method, new Set(), out);
        for (const [where, jsonName, name] of out.names) expect(snakeName(jsonName), where).toBe(name);
        free.push(...out.free);
        expect(OPAQUE_FIELDS[method] ?? [], method).toEqual(
          out.free.filter((p) => p.split(".").length === 3).map((p) => p.split(".")[2]),
        );
      }
    }
    expect(methods).toBeGreaterThan(10);
    expect(free).toEqual(["tool.run.result"]);
  });

  it("matches protobuf's own proto-name JSON, leaving tool results untouched", () => {
    const status = create(pb.DaemonServiceStatusResponseSchema, {
      nodeId: "nod_1",
      backendUrl: "http://t",
      runningTasks: 2,
      agents: [{ id: "agt_1", domainId: "dom_1", lastRestartAt: "2026-01-01T00:00:00Z", capabilities: ["x"] }],
    });
    const camel = toJson(pb.DaemonServiceStatusResponseSchema, status, { alwaysEmitImplicit: true });
    expect(mgmtJson("daemon.status", camel)).toEqual(
      toJson(pb.DaemonServiceStatusResponseSchema, status, { alwaysEmitImplicit: true, useProtoFieldName: true }),
    );
    const run = { result: { task: { id: "tsk_1", input: { myKey: 1 } } }, shortCircuited: true };
    expect(mgmtJson("tool.run", run)).toEqual({
      result: { task: { id: "tsk_1", input: { myKey: 1 } } },
      short_circuited: true,
    });
  });
});
