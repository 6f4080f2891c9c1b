// The contract's closed sets as protobuf enums (APPROVAL_STATUS_PENDING) and as the lowercase
// words the REST surface, the CLI's JSON and the event stream use ("pending"): one mapping, read
// from the descriptors (the enum's shared prefix stripped, the rest lowercased), not per field.
import type { DescEnum, DescField, DescMessage } from "@bufbuild/protobuf";
import { timestampDate, timestampMs, type Timestamp } from "@bufbuild/protobuf/wkt";
import { EpError } from "./errors.js";
import { RUNTIME_KINDS } from "./runtimes.js";

/**
 * Words that keep capitals the enum value names cannot (SPEC §1 spells "vendorA_code"), by enum:
 * a value whose lowercased name matches one of these case-insensitively is spelled this way.
 */
const SPELLINGS: Record<string, readonly string[]> = { "ep.tower.v1.Runtime": RUNTIME_KINDS };

/**
 * "pending" for APPROVAL_STATUS_PENDING of ApprovalStatus; "" for the _UNSPECIFIED value (and a number the enum does
 * not have).
 */
export function enumWord(e: DescEnum, value: number): string {
  let words = spelled.get(e);
  if (!words)
    spelled.set(
      e,
      (words = new Map(e.values.filter((v) => v.number !== 0).map((v) => [v.number, spell(e, v.localName)]))),
    );
  return words.get(value) ?? "";
}

/** value → word per enum, built once: every REST answer writes its enums' words (a hot path). */
const spelled = new WeakMap<DescEnum, Map<number, string>>();
function spell(e: DescEnum, localName: string): string {
  const lower = localName.toLowerCase();
  return SPELLINGS[e.typeName]?.find((w) => w.toLowerCase() === lower) ?? lower;
}

/** The enum value a lowercase word names, or undefined. */
export function enumValue(e: DescEnum, word: string): number | undefined {
  const w = word.trim().toLowerCase();
  return w ? wordTable(e).get(w) : undefined;
}

/** word → value per enum, built once: every task message converts its stored words (a hot path). */
const tables = new WeakMap<DescEnum, Map<string, number>>();
function wordTable(e: DescEnum): Map<string, number> {
  let t = tables.get(e);
  if (!t)
    tables.set(
      e,
      (t = new Map(e.values.filter((v) => v.number !== 0).map((v) => [enumWord(e, v.number).toLowerCase(), v.number]))),
    );
  return t;
}

/** A stored ISO 8601 time as the contract's Timestamp; undefined for "" (not set). */
export const timestampOf = (iso: string): Timestamp | undefined => (iso ? timestampAt(Date.parse(iso)) : undefined);

/**
 * A time in ms as the contract's Timestamp: the message built directly (create() is reflective; every task message
 * carries three).
 */
export function timestampAt(ms: number): Timestamp {
  const seconds = Math.floor(ms / 1000);
  return { $typeName: "google.protobuf.Timestamp", seconds: BigInt(seconds), nanos: (ms - seconds * 1000) * 1_000_000 };
}

/** A contract Timestamp as REST, the CLI and logs show times: ISO 8601 in UTC with milliseconds; "" when unset. */
export const isoOf = (t: Timestamp | undefined): string => (t ? timestampDate(t).toISOString() : "");

/** A contract Timestamp in milliseconds since the epoch; NaN when unset. */
export const msOf = (t: Timestamp | undefined): number => (t ? timestampMs(t) : Number.NaN);

export const isTimestamp = (f: DescField) =>
  f.fieldKind === "message" && f.message.typeName === "google.protobuf.Timestamp";
/** A Duration field: REST speaks it as `<name>_ms`, a number of milliseconds ("wait" is "wait_ms"). */
export const isDuration = (f: DescField) =>
  f.fieldKind === "message" && f.message.typeName === "google.protobuf.Duration";

/**
 * The other way: a request's JSON (proto field names or JSON names) with every enum field given
 * as its lowercase word turned into the enum's proto name, so fromJson reads it. A proto name or
 * number passes as it is; a word the enum does not have is invalid_argument naming the field and
 * the words it takes.
 */
export function enumsFromWords(schema: DescMessage, json: unknown, path = ""): unknown {
  if (!json || typeof json !== "object" || Array.isArray(json)) return json;
  const plan = readPlan(schema);
  if (!plan.length) return json;
  const src = json as Record<string, unknown>;
  // copied on the first change only, and keys dropped by building anew (no `delete`): every REST
  // request body passes through here
  let out: Record<string, unknown> | undefined;
  let drop: string[] | undefined;
  const set = (k: string, v: unknown) => void ((out ??= { ...src })[k] = v);
  for (const f of plan) {
    if (isDuration(f)) {
      const msKey = `${f.name}_ms`;
      if (!(msKey in src)) continue;
      const ms = src[msKey];
      const at = path ? `${path}.${msKey}` : msKey;
      if (typeof ms !== "number" || !Number.isInteger(ms) || ms < 0) {
        throw new EpError(
          "invalid_argument",
          `${at}: must be a whole number of milliseconds, 0 or more (got ${JSON.stringify(ms)})`,
          { field: at },
        );
      }
      (drop ??= []).push(msKey);
      set(f.name, `${ms / 1000}s`);
      continue;
    }
    const key = f.name in src ? f.name : f.jsonName in src ? f.jsonName : undefined;
    if (key === undefined) continue;
    const v = src[key];
    // REST writes an unset time as ""; read it back as unset
    if (isTimestamp(f)) {
      if (v === "") (drop ??= []).push(key);
      continue;
    }
    const at = path ? `${path}.${f.name}` : f.name;
    const e = f.fieldKind === "enum" ? f.enum : f.fieldKind === "list" && f.listKind === "enum" ? f.enum : undefined;
    if (e) {
      const name = (x: unknown) => {
        if (typeof x !== "string" || e.values.some((ev) => ev.name === x)) return x;
        return e.value[valueOrRefuse(e, x, at)].name;
      };
      set(key, Array.isArray(v) ? v.map(name) : name(v));
    } else {
      const m = (f as DescField & { message: DescMessage }).message;
      const read = Array.isArray(v) ? v.map((x, i) => enumsFromWords(m, x, `${at}[${i}]`)) : enumsFromWords(m, v, at);
      if (read !== v) set(key, read);
    }
  }
  if (!drop) return out ?? src;
  const base = out ?? src;
  const kept: Record<string, unknown> = {};
  for (const k of Object.keys(base)) if (!drop.includes(k)) kept[k] = base[k];
  return kept;
}

/**
 * The fields a REST request's reader looks at: enums, times, durations and the contract's own messages (which may hold
 * them).
 */
const readPlans = new WeakMap<DescMessage, DescField[]>();
function readPlan(schema: DescMessage): DescField[] {
  let plan = readPlans.get(schema);
  if (!plan) {
    const kindOf = (f: DescField) => (f.fieldKind === "list" ? f.listKind : f.fieldKind);
    plan = schema.fields.filter(
      (f) =>
        kindOf(f) === "enum" ||
        isTimestamp(f) ||
        isDuration(f) ||
        (kindOf(f) === "message" && (f as DescField & { message: DescMessage }).message.typeName.startsWith("ep.")),
    );
    readPlans.set(schema, plan);
  }
  return plan;
}

/**
 * The enum value of a word a person typed ("" is unset, 0); an unknown word is invalid_argument naming `field` and the
 * words it takes.
 */
export function enumOf<T extends number>(e: DescEnum, word: string, field: string): T {
  return (word.trim() ? valueOrRefuse(e, word, field) : 0) as T;
}

/** The value a word names; a word the enum does not have is invalid_argument naming `field` and the words it takes. */
function valueOrRefuse(e: DescEnum, word: string, field: string): number {
  const n = enumValue(e, word);
  if (n !== undefined) return n;
  const words = e.values.filter((v) => v.number !== 0).map((v) => enumWord(e, v.number));
  throw new EpError("invalid_argument", `${field}: must be one of ${words.join(", ")} (got ${JSON.stringify(word)})`, {
    field,
  });
}
