// The schema pack: JSON Schemas the daemon checks tool payloads against before a call
// leaves for /mcp/call. A pack is a JSON file (EP_SCHEMA_PACK_FILE) mapping payload kinds
// to schemas; kinds it leaves out keep the embedded defaults. A pack that cannot be read,
// parsed or compiled is replaced by the embedded defaults with a warning, so a bad file
// never stops the daemon from starting. Format and examples: docs/booster.md.
import { readFileSync } from "node:fs";
import AjvModule, { type ErrorObject, type ValidateFunction } from "ajv";
import { EpError } from "../../common/errors.js";
import type { Logger } from "../../common/log.js";

const Ajv = AjvModule.default;

export const PAYLOAD_KINDS = ["domain", "mission", "task", "doc", "artifact"] as const;
export type PayloadKind = (typeof PAYLOAD_KINDS)[number];

/** MCP tools whose arguments are a payload of some kind; every other tool passes unchecked. */
export const TOOL_PAYLOAD_KINDS: Readonly<Record<string, PayloadKind>> = {
  create_domain: "domain",
  update_domain: "domain",
  create_mission: "mission",
  update_mission: "mission",
  submit_mesh_task: "task",
  create_task: "task",
  put_doc: "doc",
  create_doc: "doc",
  put_artifact: "artifact",
  create_artifact: "artifact",
};

const id = { type: "string", minLength: 1 };
const text = { type: "string" };

/**
 * The embedded defaults, following the argument shapes of the tower's tool catalog
 * (snake_case). They are deliberately no stricter than the catalog, which the tower
 * enforces anyway: they name the few fields a payload cannot do without and type the ones
 * it may have; unknown fields pass so a newer tower can add some.
 */
export const DEFAULT_SCHEMAS: Readonly<Record<PayloadKind, object>> = {
  domain: {
    type: "object",
    required: ["name"],
    properties: { name: { type: "string", minLength: 1, maxLength: 200 } },
  },
  mission: {
    type: "object",
    required: ["title"],
    properties: { domain_id: id, title: { type: "string", minLength: 1, maxLength: 500 }, description: text },
  },
  task: {
    type: "object",
    required: ["title"],
    properties: {
      domain_id: id,
      mission_id: id,
      kind: { enum: ["assigned", "claimable"] },
      title: { type: "string", minLength: 1, maxLength: 500 },
      description: text,
      claim_policy: text,
      priority: { type: "integer" },
      capabilities: { type: "array", items: { type: "string" } },
      assignee_agent_id: id,
      max_attempts: { type: "integer", minimum: 1 },
      runtime: text,
      input: { type: "object" },
      status: text,
    },
  },
  doc: {
    type: "object",
    minProperties: 1,
    properties: {
      mission_id: id,
      doc_id: id,
      name: { type: "string", minLength: 1 },
      title: text,
      content: text,
      content_type: text,
    },
  },
  artifact: {
    type: "object",
    minProperties: 1,
    properties: {
      task_id: id,
      mission_id: id,
      name: { type: "string", minLength: 1 },
      content: text,
      content_type: text,
      uri: text,
    },
  },
};

export interface SchemaPack {
  /** "embedded" or the path the pack was read from. */
  readonly source: string;
  /** Why the file given was not used (the pack then is the embedded defaults). */
  readonly warning?: string;
  readonly validators: Readonly<Record<PayloadKind, ValidateFunction>>;
}

export interface PayloadError {
  /** JSON Pointer into the tool's arguments ("/" for the whole payload). */
  path: string;
  message: string;
}

function newAjv(log: Logger) {
  return new Ajv({
    allErrors: true,
    // A pack written for another validator may use keywords or formats Ajv does not know:
    // ignore them rather than refuse the pack.
    strict: false,
    logger: {
      log: () => {},
      warn: (...args: unknown[]) => log.warn("schema pack", { detail: args.join(" ") }),
      error: () => {},
    },
  });
}

function compileAll(schemas: Record<PayloadKind, object>, log: Logger): Record<PayloadKind, ValidateFunction> {
  const ajv = newAjv(log);
  const out = {} as Record<PayloadKind, ValidateFunction>;
  for (const kind of PAYLOAD_KINDS) {
    try {
      out[kind] = ajv.compile(schemas[kind]);
    } catch (err) {
      throw new Error(`${kind}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return out;
}

/** Reads and compiles a pack file; throws a message saying what is wrong with it. */
function readPack(path: string, log: Logger): Record<PayloadKind, ValidateFunction> {
  let raw: string;
  try {
    raw = readFileSync(path, "utf8");
  } catch (err) {
    throw new Error(`cannot read the file (${err instanceof Error ? err.message : String(err)})`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    throw new Error(`not valid JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new Error(`must be a JSON object mapping ${PAYLOAD_KINDS.join(", ")} to JSON Schemas`);
  }
  const schemas: Record<PayloadKind, object> = { ...DEFAULT_SCHEMAS };
  for (const [key, schema] of Object.entries(parsed)) {
    if (key.startsWith("$")) continue; // "$schema", "$comment" and the like describe the pack itself
    if (!(PAYLOAD_KINDS as readonly string[]).includes(key)) {
      throw new Error(`unknown payload kind "${key}" (expected ${PAYLOAD_KINDS.join(", ")})`);
    }
    if (typeof schema !== "object" && typeof schema !== "boolean")
      throw new Error(`${key}: a schema must be an object or a boolean`);
    if (schema === null || Array.isArray(schema)) throw new Error(`${key}: a schema must be an object or a boolean`);
    schemas[key as PayloadKind] = schema as object;
  }
  return compileAll(schemas, log);
}

/**
 * Loads the schema pack at `path` (EP_SCHEMA_PACK_FILE), or the embedded defaults when
 * `path` is undefined or empty. A pack that is missing or invalid logs a warning and
 * yields the embedded defaults; this never throws.
 */
export function loadSchemaPack(path: string | undefined, log: Logger): SchemaPack {
  if (path) {
    try {
      const validators = readPack(path, log);
      log.info("schema pack loaded", { path });
      return { source: path, validators };
    } catch (err) {
      const warning =
        `schema pack ${path} is invalid, using the embedded ` +
        `defaults: ${err instanceof Error ? err.message : String(err)}`;
      log.warn(warning, { path });
      return { source: "embedded", warning, validators: compileAll({ ...DEFAULT_SCHEMAS }, log) };
    }
  }
  return { source: "embedded", validators: compileAll({ ...DEFAULT_SCHEMAS }, log) };
}

function toPayloadError(err: ErrorObject): PayloadError {
  const at = err.instancePath;
  if (err.keyword === "required") {
    return { path: `${at}/${(err.params as { missingProperty: string }).missingProperty}`, message: "is required" };
  }
  if (err.keyword === "additionalProperties") {
    return {
      path: `${at}/${(err.params as { additionalProperty: string }).additionalProperty}`,
      message: "is not allowed",
    };
  }
  return { path: at || "/", message: err.message ?? `fails ${err.keyword}` };
}

/** The payload kind a tool's arguments carry, or undefined for tools the pack does not check. */
export function payloadKindOf(tool: string): PayloadKind | undefined {
  return Object.hasOwn(TOOL_PAYLOAD_KINDS, tool) ? TOOL_PAYLOAD_KINDS[tool] : undefined;
}

/**
 * Checks a tool call's arguments against the pack. Returns an `invalid_argument` EpError
 * whose message lists each problem as "<JSON path>: <message>" (e.g. "/title: must be
 * string") and whose details carry them, or undefined when the payload is fine or the tool
 * carries no payload kind.
 */
export function validatePayload(pack: SchemaPack, tool: string, args: unknown): EpError | undefined {
  const kind = payloadKindOf(tool);
  if (!kind) return undefined;
  const validate = pack.validators[kind];
  if (validate(args ?? {})) return undefined;
  const errors = (validate.errors ?? []).map(toPayloadError);
  const summary = errors.map((e) => `${e.path}: ${e.message}`).join("; ");
  return new EpError("invalid_argument", `${tool}: the ${kind} payload does not match the schema pack: ${summary}`, {
    field: errors[0]?.path ?? "/",
    tool,
    kind,
    schema_pack: pack.source,
    errors,
  });
}
