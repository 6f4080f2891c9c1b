// The contract's closed sets as protobuf enums (APPROVAL_STATUS_PENDING) and as the lowercase
// words the REST surface, the CLI's JSON and the event stream use ("pending"): one mapping, read
// from the descriptors (the enum's shared prefix stripped, the rest lowercased), not per field.
import type { DescEnum, DescMessage } from "@bufbuild/protobuf";

/** "pending" for APPROVAL_STATUS_PENDING of ApprovalStatus; "" for the _UNSPECIFIED value. */
export function enumWord(e: DescEnum, value: number): string {
  const v = e.value[value];
  if (!v || v.number === 0) return "";
  return v.localName.toLowerCase();
}

/** The enum value a lowercase word names, or undefined. */
export function enumValue(e: DescEnum, word: string): number | undefined {
  const w = word.trim().toLowerCase();
  return w ? e.values.find((v) => v.number !== 0 && v.localName.toLowerCase() === w)?.number : undefined;
}

/**
 * A message's proto JSON (useProtoFieldName) with every enum field, at any depth, turned from its
 * proto name to its lowercase word: what REST and the CLI print.
 */
export function wordsInJson(schema: DescMessage, json: unknown): unknown {
  if (!json || typeof json !== "object" || Array.isArray(json)) return json;
  const out: Record<string, unknown> = { ...(json as Record<string, unknown>) };
  for (const f of schema.fields) {
    const v = out[f.name];
    if (v === undefined) continue;
    const enumOf = f.fieldKind === "enum" ? f.enum : f.fieldKind === "list" && f.listKind === "enum" ? f.enum : undefined;
    const messageOf = f.fieldKind === "message" ? f.message : f.fieldKind === "list" && f.listKind === "message" ? f.message : undefined;
    if (enumOf) {
      const word = (x: unknown) => (typeof x === "string" ? enumWord(enumOf, enumOf.values.find((ev) => ev.name === x)?.number ?? 0) : x);
      out[f.name] = Array.isArray(v) ? v.map(word) : word(v);
    } else if (messageOf && messageOf.typeName.startsWith("ep.")) {
      out[f.name] = Array.isArray(v) ? v.map((x) => wordsInJson(messageOf, x)) : wordsInJson(messageOf, v);
    }
  }
  return out;
}
