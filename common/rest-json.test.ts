// The one-pass REST writer against the definition it replaces: proto JSON (snake_case, every
// implicit field present), then enums as words, times as ISO with milliseconds ("" unset) and a
// Duration x as x_ms. Every message of the contract, filled field by field, must come out the same.
import { create, toJson, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { file_ep_tower_v1_ai } from "../gen/ep/tower/v1/ai_pb.js";
import { file_ep_tower_v1_approvals } from "../gen/ep/tower/v1/approvals_pb.js";
import { file_ep_tower_v1_auth } from "../gen/ep/tower/v1/auth_pb.js";
import { file_ep_tower_v1_events } from "../gen/ep/tower/v1/events_pb.js";
import { file_ep_tower_v1_fleet } from "../gen/ep/tower/v1/fleet_pb.js";
import { file_ep_tower_v1_resources, TaskSchema } from "../gen/ep/tower/v1/resources_pb.js";
import { file_ep_tower_v1_secrets } from "../gen/ep/tower/v1/secrets_pb.js";
import { file_ep_tower_v1_tools } from "../gen/ep/tower/v1/tools_pb.js";
import { file_ep_tower_v1_work } from "../gen/ep/tower/v1/work_pb.js";
import { restJson } from "./rest-json.js";
import { enumWord, timestampAt } from "./vocab.js";

const FILES = [
  file_ep_tower_v1_ai,
  file_ep_tower_v1_approvals,
  file_ep_tower_v1_auth,
  file_ep_tower_v1_events,
  file_ep_tower_v1_fleet,
  file_ep_tower_v1_resources,
  file_ep_tower_v1_secrets,
  file_ep_tower_v1_tools,
  file_ep_tower_v1_work,
];

/** The definition: proto JSON rewritten (what restJson was before it became one pass). */
function oracle(schema: DescMessage, json: Record<string, unknown>): Record<string, unknown> {
  const out = { ...json };
  for (const f of schema.fields) {
    const v = out[f.name];
    const m = f.fieldKind === "message" || (f.fieldKind === "list" && f.listKind === "message") ? f.message : undefined;
    const e = f.fieldKind === "enum" || (f.fieldKind === "list" && f.listKind === "enum") ? f.enum : undefined;
    const each = (g: (x: unknown) => unknown) => (Array.isArray(v) ? v.map(g) : g(v));
    if (m?.typeName === "google.protobuf.Timestamp")
      out[f.name] = v === undefined ? "" : each((x) => new Date(x as string).toISOString());
    else if (m?.typeName === "google.protobuf.Duration") {
      delete out[f.name];
      out[`${f.name}_ms`] = v === undefined ? 0 : Math.round(Number.parseFloat(v as string) * 1000);
    } else if (v === undefined) continue;
    else if (e) out[f.name] = each((x) => enumWord(e, e.values.find((ev) => ev.name === x)!.number));
    else if (m?.typeName.startsWith("ep.")) out[f.name] = each((x) => oracle(m, x as Record<string, unknown>));
  }
  return out;
}

/** A message with every field set (lists of two, optional fields set on even depths), nested ep messages two deep. */
function filled(schema: DescMessage, depth = 0): Record<string, unknown> {
  const init: Record<string, unknown> = {};
  for (const f of schema.fields) {
    if (f.proto.proto3Optional && depth % 2 === 1) continue;
    const one = () => sample(f, depth);
    // a list of messages past the depth is empty (a message list never holds an unset element)
    if (f.fieldKind === "list")
      init[f.localName] =
        f.listKind === "message" && depth >= 2 && f.message!.typeName.startsWith("ep.") ? [] : [one(), one()];
    else init[f.localName] = one();
  }
  return init;
}

let n = 0;
function sample(f: DescField, depth: number): unknown {
  n++;
  const kind = f.fieldKind === "list" ? f.listKind : f.fieldKind;
  if (kind === "enum") return f.enum!.values[n % f.enum!.values.length].number; // 0 (unset) included
  if (kind === "message") {
    const m = f.message!;
    if (m.typeName === "google.protobuf.Timestamp") return timestampAt(n % 2 ? 1_795_000_000_000 : 1_795_000_000_123);
    if (m.typeName === "google.protobuf.Duration") return durationFromMs(n % 2 ? 1500 : 60_000);
    if (m.typeName === "google.protobuf.Struct") return { a: 1, b: ["x"] };
    if (m.typeName === "google.protobuf.Value") return { kind: { case: "stringValue", value: "v" } };
    if (depth >= 2) return undefined;
    return create(m, filled(m, depth + 1));
  }
  if (f.scalar === 9) return `s${n}`; // string
  if (f.scalar === 8) return n % 2 === 0; // bool
  if ([3, 4, 18, 6, 16].includes(f.scalar!)) return BigInt(n) * 1_000_000_007n; // 64-bit
  if (f.scalar === 1 || f.scalar === 2) return n % 5 === 0 ? Number.NaN : n + 0.25; // double, float
  return n;
}

describe("restJson", () => {
  const messages = FILES.flatMap((file) => file.messages);
  it("writes every message of the contract as proto JSON rewritten for REST would", () => {
    expect(messages.length).toBeGreaterThan(100);
    for (const schema of messages) {
      const msg = create(schema, filled(schema));
      const want = oracle(
        schema,
        toJson(schema, msg, { useProtoFieldName: true, alwaysEmitImplicit: true }) as Record<string, unknown>,
      );
      expect(restJson(schema, msg), schema.typeName).toEqual(want);
      // and an empty one: implicit fields present, unset messages absent, times "", durations 0
      const empty = create(schema);
      expect(restJson(schema, empty), `${schema.typeName} (empty)`).toEqual(
        oracle(
          schema,
          toJson(schema, empty, { useProtoFieldName: true, alwaysEmitImplicit: true }) as Record<string, unknown>,
        ),
      );
    }
  });

  it("keeps the milliseconds REST always wrote, and an unknown enum number as the number", () => {
    const task = create(TaskSchema, { id: "t", createdAt: timestampAt(1_795_000_000_000), status: 99 as never });
    expect(restJson(TaskSchema, task)).toMatchObject({
      created_at: new Date(1_795_000_000_000).toISOString(),
      updated_at: "",
      status: 99,
      runtime: "",
    });
    expect(new Date(1_795_000_000_000).toISOString()).toMatch(/\.000Z$/);
  });
});
