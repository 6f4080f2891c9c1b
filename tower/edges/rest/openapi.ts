// The REST surface as an OpenAPI 3.1 document, served at /openapi.json. Routes from the REST
// tables (work, AI sessions) are described from their protobuf request and response messages,
// the same descriptors their codec uses, so a field added to the contract shows here at once;
// the hand-written routes (streams, MCP, login session, health) are listed in OTHER_ROUTES.
// tests/openapi.test.ts validates the document and fails when a served route is missing.
import { ScalarType, type DescEnum, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { ERROR_CATALOG } from "../../../common/errors.js";
import { enumWord, isDuration } from "../../../common/vocab.js";
import type { RestRoute } from "./work-routes.js";

type Schema = Record<string, unknown>;

interface OtherRoute {
  method: string;
  url: string;
  summary: string;
  /** no credential needed */
  public?: boolean;
  /** the response's media type and schema (default: a JSON object) */
  produces?: string;
  status?: number;
  body?: Schema;
  query?: Record<string, string>;
}

const json = (properties: Record<string, Schema>, required: string[] = []): Schema => ({
  type: "object",
  properties,
  ...(required.length ? { required } : {}),
  additionalProperties: false,
});
const str: Schema = { type: "string" };
const anyJson: Schema = {};
// any JSON object, said explicitly: generators read a bare {"type": "object"} as an object with no
// properties (openapi-typescript: Record<string, never>), so a client could not set input.command
const openObject: Schema = { type: "object", additionalProperties: true };

/** The routes that are not in a REST table: their own handlers, described here. */
export const OTHER_ROUTES: OtherRoute[] = [
  { method: "GET", url: "/healthz", summary: "Liveness: the process answers.", public: true },
  { method: "GET", url: "/readyz", summary: "Readiness: the store answers (503 when it does not).", public: true },
  { method: "GET", url: "/.well-known/jwks.json", summary: "The public keys node JWTs are signed with.", public: true },
  { method: "GET", url: "/openapi.json", summary: "This document.", public: true },
  {
    method: "GET",
    url: "/metrics",
    summary: "Prometheus metrics (text format 0.0.4); a viewer, operator or admin token (docs/metrics.md).",
    produces: "text/plain",
  },
  { method: "GET", url: "/ui", summary: "The web console (HTML).", public: true, produces: "text/html" },
  { method: "GET", url: "/ui/*", summary: "The web console's files.", public: true, produces: "*/*" },
  {
    method: "POST",
    url: "/auth/session",
    summary: "Console login: a one-time ticket or a token becomes an HttpOnly session cookie bound to it.",
    public: true,
    body: json({ ticket: str, token: str }),
  },
  { method: "GET", url: "/auth/session", summary: "Who the session (or token) is: role and subject." },
  { method: "DELETE", url: "/auth/session", summary: "Logout: ends the session and clears the cookie." },
  {
    method: "GET",
    url: "/auth/oidc",
    summary: "Whether console sign-in through the identity provider is on, and the provider's name.",
    public: true,
  },
  {
    method: "GET",
    url: "/auth/oidc/start",
    summary: "Console sign-in: redirects to the identity provider (authorization code flow with PKCE).",
    public: true,
    status: 302,
    produces: "text/html",
  },
  {
    method: "GET",
    url: "/auth/oidc/callback",
    summary:
      "The identity provider's redirect back: a console session, then the console (or a page that says why not).",
    public: true,
    status: 302,
    produces: "text/html",
  },
  {
    method: "GET",
    url: "/events/stream",
    summary: "The event stream (SSE): `id:`/`data:` lines, resume with Last-Event-ID.",
    produces: "text/event-stream",
    query: {
      type: "event types, comma-separated",
      domain_id: "one domain",
      mission_id: "one mission",
      agent_id: "one agent",
      session_id: "one AI session",
      task_id: "one task",
      last_event_id: "resume after this id",
    },
  },
  { method: "GET", url: "/events/ws", summary: "The event stream over a WebSocket (HTTP/1.1 Upgrade).", status: 101 },
  {
    method: "GET",
    url: "/api/attach-ws",
    summary: "Attach to an agent's terminal over a WebSocket (HTTP/1.1 Upgrade).",
    status: 101,
  },
  {
    method: "GET",
    url: "/api/attach-dial",
    summary: "A node's side of an attach relay (WebSocket; node credential).",
    status: 101,
  },
  {
    method: "GET",
    url: "/ai/sessions/{session_id}/stream",
    summary: "An AI session's events (SSE), resume with Last-Event-ID.",
    produces: "text/event-stream",
    query: { last_event_id: "resume after this id" },
  },
  { method: "GET", url: "/mcp/tools", summary: "The MCP tool catalog the caller may use." },
  {
    method: "POST",
    url: "/mcp/call",
    summary: "Call one MCP tool.",
    body: json({ tool: str, arguments: openObject, agent_id: str, domain_id: str }, ["tool"]),
  },
  { method: "POST", url: "/mcp", summary: "MCP over Streamable HTTP (JSON-RPC 2.0 messages).", body: openObject },
  {
    method: "GET",
    url: "/mcp",
    summary: "MCP Streamable HTTP: the server-to-client stream (not offered: 405 in JSON-RPC).",
    produces: "application/json",
  },
  {
    method: "DELETE",
    url: "/mcp",
    summary: "MCP Streamable HTTP: end a session (stateless: nothing to end).",
    produces: "application/json",
  },
];

function scalarSchema(t: ScalarType): Schema {
  switch (t) {
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.BYTES:
      return { type: "string", contentEncoding: "base64" };
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return { type: "number" };
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      // proto3 JSON: 64-bit integers are written as strings, read as either
      return { type: ["string", "integer"], format: "int64" };
    default:
      return { type: "integer", format: "int32" };
  }
}

/** An enum as REST speaks it: its lowercase words, "" when unset (common/vocab.ts). */
const wordsOf = (e: DescEnum): Schema => ({ type: "string", enum: e.values.map((v) => enumWord(e, v.number)) });

/** JSON Schemas of messages, by full name, filled as they are referred to. */
class Schemas {
  readonly byName: Record<string, Schema> = {};

  ref(m: DescMessage): Schema {
    switch (m.typeName) {
      case "google.protobuf.Struct":
        return openObject;
      case "google.protobuf.Value":
        return anyJson;
      case "google.protobuf.ListValue":
        return { type: "array" };
      case "google.protobuf.Timestamp":
        // ISO 8601 in UTC with milliseconds; "" when not set
        return {
          anyOf: [
            { type: "string", format: "date-time" },
            { type: "string", const: "" },
          ],
        };
    }
    if (!this.byName[m.typeName]) {
      this.byName[m.typeName] = {}; // a placeholder first: messages may refer to themselves
      this.byName[m.typeName] = this.object(m);
    }
    return { $ref: `#/components/schemas/${m.typeName}` };
  }

  /** The message as an object schema with its proto (snake_case) field names, as REST speaks it. */
  object(m: DescMessage, omit: ReadonlySet<string> = new Set()): Schema {
    const properties: Record<string, Schema> = {};
    for (const f of m.fields) {
      if (omit.has(f.name)) continue;
      // a Duration is `<name>_ms` in REST (common/vocab.ts)
      if (isDuration(f)) properties[`${f.name}_ms`] = { type: "integer", minimum: 0, description: "milliseconds" };
      else properties[f.name] = this.field(f);
    }
    return { type: "object", properties, additionalProperties: false };
  }

  field(f: DescField): Schema {
    const one = (): Schema => {
      if (f.fieldKind === "list")
        return {
          type: "array",
          items:
            f.listKind === "message"
              ? this.ref(f.message)
              : f.listKind === "enum"
                ? wordsOf(f.enum)
                : scalarSchema(f.scalar),
        };
      if (f.fieldKind === "map")
        return {
          type: "object",
          additionalProperties:
            f.mapKind === "message"
              ? this.ref(f.message)
              : f.mapKind === "enum"
                ? wordsOf(f.enum)
                : scalarSchema(f.scalar),
        };
      if (f.fieldKind === "message") return this.ref(f.message);
      if (f.fieldKind === "enum") return wordsOf(f.enum);
      return scalarSchema(f.scalar);
    };
    return one();
  }
}

const IDEMPOTENCY_KEY_PARAMETER = {
  name: "Idempotency-Key",
  in: "header",
  required: false,
  description:
    "A unique value (a UUID) per create: a retry within 24 h with the same key " +
    "returns the first answer; the same key with another body is refused (409 " +
    "idempotency_key_reused). The body's request_id is the same key. docs/api.md",
  schema: { type: "string", minLength: 1, maxLength: 255, pattern: "^[\\x21-\\x7e]([\\x20-\\x7e]*[\\x21-\\x7e])?$" },
};

const pathOf = (url: string) => url.replace(/:(\w+)/g, "{$1}");
const paramsOf = (url: string) => [...url.matchAll(/[:{](\w+)\}?/g)].map((m) => m[1]);

const ERROR_SCHEMA: Schema = json(
  {
    error: json(
      {
        code: { type: "string", enum: Object.keys(ERROR_CATALOG), description: "EP's stable error code (docs/api.md)" },
        message: str,
        details: { ...openObject, description: 'what the error carries for a program, e.g. {"field": "name"}' },
      },
      ["code", "message", "details"],
    ),
  },
  ["error"],
);

const errorResponses = (isPublic: boolean) => ({
  ...(isPublic ? {} : { "401": { $ref: "#/components/responses/Unauthenticated" } }),
  default: { $ref: "#/components/responses/Error" },
});

/** The whole document. */
export function buildOpenApi(tables: readonly RestRoute[], version: string): Record<string, unknown> {
  const schemas = new Schemas();
  const paths: Record<string, Record<string, unknown>> = {};
  const at = (url: string) => (paths[pathOf(url)] ??= {});

  for (const r of tables) {
    const pathParams = paramsOf(r.url);
    const omit = new Set([...pathParams, ...Object.keys(r.fixed ?? {}), ...(r.query ?? [])]);
    const parameters = [
      ...pathParams.map((name) => ({ name, in: "path", required: true, schema: str })),
      ...(r.query ?? []).map((name) => {
        const field = r.input.fields.find((f) => f.name === name);
        return { name, in: "query", required: false, schema: field ? schemas.field(field) : str };
      }),
      ...(r.idempotent ? [IDEMPOTENCY_KEY_PARAMETER] : []),
    ];
    const hasBody = r.method !== "GET" && r.method !== "DELETE";
    const camelPath = pathOf(r.url).replace(/[^A-Za-z0-9]+(\w)?/g, (_, c: string | undefined) =>
      c ? c.toUpperCase() : "",
    );
    at(r.url)[r.method.toLowerCase()] = {
      operationId: `${r.method.toLowerCase()}${camelPath}`,
      summary: `${r.input.typeName
        .replace(/Request$/, "")
        .split(".")
        .pop()} (the REST face of ${r.input.typeName.replace(/Request$/, "")})`,
      ...(parameters.length ? { parameters } : {}),
      ...(hasBody
        ? {
            requestBody: {
              required: false,
              content: { "application/json": { schema: schemas.object(r.input, omit) } },
            },
          }
        : {}),
      responses: {
        [String(r.status ?? 200)]: {
          description: r.output.typeName,
          content: { "application/json": { schema: schemas.ref(r.output) } },
        },
        ...errorResponses(false),
      },
    };
  }

  for (const r of OTHER_ROUTES) {
    const parameters = [
      ...paramsOf(r.url).map((name) => ({ name, in: "path", required: true, schema: str })),
      ...Object.entries(r.query ?? {}).map(([name, description]) => ({
        name,
        in: "query",
        required: false,
        description,
        schema: str,
      })),
    ];
    const url = r.url.replace(/\*$/, "{path}");
    if (r.url.endsWith("*")) parameters.push({ name: "path", in: "path", required: true, schema: str });
    at(url)[r.method.toLowerCase()] = {
      summary: r.summary,
      ...(r.public ? { security: [] } : {}),
      ...(parameters.length ? { parameters } : {}),
      ...(r.body ? { requestBody: { required: true, content: { "application/json": { schema: r.body } } } } : {}),
      responses: {
        [String(r.status ?? 200)]: {
          description: r.summary,
          ...(r.status === 101
            ? {}
            : {
                content: {
                  [r.produces ?? "application/json"]: {
                    schema: r.produces && r.produces !== "application/json" ? str : openObject,
                  },
                },
              }),
        },
        ...errorResponses(Boolean(r.public)),
      },
    };
  }

  return {
    openapi: "3.1.0",
    info: {
      title: "EP tower REST API",
      version,
      description:
        "The REST face of the tower. The same operations are served as " +
        "Connect, gRPC and gRPC-Web RPCs (proto/ep/tower/v1); docs/api.md.",
    },
    servers: [{ url: "/" }],
    security: [{ bearer: [] }],
    paths,
    components: {
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description:
            "a service-account token (ept_…), an OIDC JWT or a node " +
            "JWT; the console sends its ep_session cookie instead",
        },
      },
      schemas: { Error: ERROR_SCHEMA, ...schemas.byName },
      responses: {
        Error: {
          description: "EP's error (docs/api.md: the code's class decides the status)",
          content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
        },
        Unauthenticated: {
          description: "No valid credential",
          headers: { "WWW-Authenticate": { schema: str, description: 'Bearer realm="ep"' } },
          content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
        },
      },
    },
  };
}
