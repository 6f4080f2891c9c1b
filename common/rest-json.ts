// The one writer of REST bodies, the CLI's --json, the MCP tools' results and node reports: a
// message as snake_case JSON with every field present, enums as their words, times as ISO 8601
// with milliseconds ("" when unset) and a Duration `x` as `x_ms` (common/vocab.ts has the rules
// and the reader). One pass over the message, planned once per message type: every REST answer
// goes through here (bench/claim.ts: three per task), so it does not build proto JSON first and
// rewrite it after.
import { isMessage, ScalarType, toJson, type DescField, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { base64Encode } from "@bufbuild/protobuf/wire";
import { durationMs, type Duration, type Timestamp } from "@bufbuild/protobuf/wkt";
import { enumWord, isDuration, isoOf, isTimestamp } from "./vocab.js";

type Json = unknown;
type Convert = (v: never) => Json;
/** Writes one field of a message into the output object. */
type Step = (msg: Record<string, unknown>, out: Record<string, Json>) => void;

/** A message as REST, the CLI's --json and the tools show it: snake_case, every field present, enums as words. */
export function restJson<D extends DescMessage>(schema: D, msg: MessageShape<D>): Record<string, unknown> {
  return write(schema, msg as unknown as Record<string, unknown>);
}

const plans = new WeakMap<DescMessage, Step[]>();

function write(schema: DescMessage, msg: Record<string, unknown>): Record<string, Json> {
  let plan = plans.get(schema);
  if (!plan) plans.set(schema, (plan = schema.fields.map(step)));
  const out: Record<string, Json> = {};
  for (const s of plan) s(msg, out);
  return out;
}

function step(f: DescField): Step {
  const name = f.name;
  const local = f.localName;
  if (isDuration(f)) {
    const key = `${name}_ms`;
    return (m, out) => void (out[key] = m[local] ? durationMs(m[local] as Duration) : 0);
  }
  const conv = converter(f);
  if (f.oneof) {
    const group = f.oneof.localName;
    return (m, out) => {
      const o = m[group] as { case?: string; value?: unknown };
      if (o.case === local) out[name] = conv(o.value as never);
    };
  }
  if (f.fieldKind === "list")
    return (m, out) => void (out[name] = (m[local] as unknown[]).map((x) => conv(x as never)));
  if (f.fieldKind === "map") {
    return (m, out) => {
      const o: Record<string, Json> = {};
      for (const [k, v] of Object.entries(m[local] as Record<string, unknown>)) o[k] = conv(v as never);
      out[name] = o;
    };
  }
  if (isTimestamp(f)) return (m, out) => void (out[name] = isoOf(m[local] as Timestamp | undefined));
  // a singular message and a proto3 `optional` scalar show only when set; other scalars always
  return (m, out) => {
    const v = m[local];
    if (v !== undefined) out[name] = conv(v as never);
  };
}

/** How one value of the field (an element, for lists and maps) is written. */
function converter(f: DescField): Convert {
  const kind = f.fieldKind === "list" ? f.listKind : f.fieldKind === "map" ? f.mapKind : f.fieldKind;
  if (kind === "enum") {
    const e = f.enum!;
    // an unknown number (a newer peer's value) is written as the number, as proto JSON does
    return ((v: number) => (e.value[v] ? enumWord(e, v) : v)) as Convert;
  }
  if (kind === "message") {
    const m = f.message!;
    if (m.typeName === "google.protobuf.Timestamp") return ((v: Timestamp) => isoOf(v)) as Convert;
    if (m.typeName === "google.protobuf.Duration") return ((v: Duration) => durationMs(v)) as Convert;
    if (m.typeName.startsWith("ep.")) return ((v: Record<string, unknown>) => write(m, v)) as Convert;
    // Struct and Value fields hold their JSON already (protobuf-es unwraps them); other
    // well-known types are written in their own JSON forms
    return ((v: unknown) => (isMessage(v) ? toJson(m, v as MessageShape<typeof m>) : v)) as Convert;
  }
  switch (f.scalar) {
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return ((v: bigint) => v.toString()) as Convert;
    case ScalarType.BYTES:
      return ((v: Uint8Array) => base64Encode(v)) as Convert;
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return ((v: number) =>
        Number.isFinite(v) ? v : Number.isNaN(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity") as Convert;
    default:
      return ((v: unknown) => v) as Convert;
  }
}
