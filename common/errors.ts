// One error catalog for every surface. A code is stable; its class decides the
// HTTP status, the Connect code, the JSON-RPC code and the CLI exit code.
import type { JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../gen/ep/errors/v1/errors_pb.js";

export type ErrorClass =
  | "invalid"
  | "unauthenticated"
  | "forbidden"
  | "not_found"
  | "method_not_allowed"
  | "conflict"
  | "too_large"
  | "rate_limited"
  | "internal"
  | "unavailable";

interface ClassMapping {
  http: number;
  connect: Code;
  jsonRpc: number;
  exit: number;
}

export const ERROR_CLASSES: Record<ErrorClass, ClassMapping> = {
  invalid: { http: 400, connect: Code.InvalidArgument, jsonRpc: -32602, exit: 2 },
  unauthenticated: { http: 401, connect: Code.Unauthenticated, jsonRpc: -32001, exit: 3 },
  forbidden: { http: 403, connect: Code.PermissionDenied, jsonRpc: -32003, exit: 3 },
  not_found: { http: 404, connect: Code.NotFound, jsonRpc: -32004, exit: 4 },
  // a known path asked with a method it does not serve (REST: 405 with Allow)
  method_not_allowed: { http: 405, connect: Code.Unimplemented, jsonRpc: -32601, exit: 2 },
  // aborted is the Connect code whose HTTP mapping is 409, like the REST surface
  conflict: { http: 409, connect: Code.Aborted, jsonRpc: -32009, exit: 5 },
  // a body over the limit is a bad request, as Google's APIs answer it (INVALID_ARGUMENT);
  // RESOURCE_EXHAUSTED is kept for rate limits, so the two differ in every protocol
  too_large: { http: 413, connect: Code.InvalidArgument, jsonRpc: -32013, exit: 2 },
  rate_limited: { http: 429, connect: Code.ResourceExhausted, jsonRpc: -32029, exit: 6 },
  internal: { http: 500, connect: Code.Internal, jsonRpc: -32603, exit: 1 },
  unavailable: { http: 503, connect: Code.Unavailable, jsonRpc: -32053, exit: 7 },
};

/** Every stable error code, its class, and the default message telling what to do. */
export const ERROR_CATALOG = {
  invalid_argument: ["invalid", "The request is malformed."],
  unknown_field: ["invalid", "The request has a field this API does not know."],
  invalid_json: ["invalid", "The body is not valid JSON."],
  config_invalid: ["invalid", "The server configuration is invalid; fix the named setting and restart."],
  unauthenticated: ["unauthenticated", "Send a valid token as 'Authorization: Bearer <token>'."],
  token_expired: ["unauthenticated", "The token has expired; create a new one."],
  token_revoked: ["unauthenticated", "The token was revoked; use a current one."],
  forbidden: ["forbidden", "Your role does not allow this."],
  oidc_callback_invalid: [
    "invalid",
    "The sign-in response does not belong to a sign-in this browser started, or is malformed; start the sign-in again.",
  ],
  oidc_sign_in_refused: [
    "forbidden",
    "The identity provider did not sign you in, or your identity carries no EP role; the message says which.",
  ],
  oidc_not_configured: [
    "not_found",
    "Sign-in through an identity provider is not configured on this tower (EP_OIDC_ISSUER and EP_OIDC_CLIENT_ID).",
  ],
  oidc_provider_unavailable: ["unavailable", "The identity provider did not answer; retry the sign-in shortly."],
  not_found: ["not_found", "No such resource."],
  domain_not_found: ["not_found", "No such domain; list them with 'ep domain ls'."],
  mission_not_found: ["not_found", "No such mission; list them with 'ep mission ls'."],
  task_not_found: ["not_found", "No such task."],
  agent_not_found: ["not_found", "No such agent; list them with 'ep agent ls'."],
  node_not_found: ["not_found", "No such node."],
  session_not_found: ["not_found", "No such AI session."],
  action_not_found: ["not_found", "No such pending action."],
  approval_not_found: ["not_found", "No such approval; list them with 'ep approvals ls'."],
  token_not_found: ["not_found", "No such token."],
  secret_not_found: ["not_found", "No such secret."],
  webhook_not_found: ["not_found", "No such webhook in that domain; list them with 'ep webhook ls --domain <domain>'."],
  route_not_found: ["not_found", "No such route."],
  method_not_allowed: [
    "method_not_allowed",
    "The path does not serve this method; the Allow header lists those it does.",
  ],
  procedure_not_found: [
    "method_not_allowed",
    "The server does not serve this procedure; list those it does with gRPC reflection ('buf curl --list-methods').",
  ],
  tool_not_found: ["not_found", "No such tool; list them with GET /mcp/tools."],
  conflict: ["conflict", "The resource is not in a state that allows this."],
  task_not_retryable: ["conflict", "Only failed or cancelled tasks can be retried."],
  agent_not_supervised: [
    "conflict",
    "Only agents their node supervises (agents.toml profiles " +
      "with supervise = true) can be restarted, paused or resumed.",
  ],
  task_not_claimable: ["conflict", "The task cannot be claimed in its current state."],
  task_wrong_kind: ["conflict", "The operation does not apply to this kind of task."],
  task_finished: ["conflict", "The task has already finished."],
  lease_not_held: ["conflict", "The task's lease is not held by this agent (it expired or was taken)."],
  lease_expired: ["conflict", "The lease expired; the task went back to the queue."],
  action_decided: ["conflict", "The action was already decided the other way."],
  approval_decided: ["conflict", "The approval was already decided (or expired)."],
  already_exists: ["conflict", "A resource with that name exists already."],
  idempotency_key_reused: [
    "conflict",
    "The idempotency key was used with another request in the last 24 hours; send a fresh key for a new request.",
  ],
  task_not_mergeable: [
    "conflict",
    "Only a succeeded task whose run had a workspace can be merged; see its result with 'ep task diff'.",
  ],
  merge_refused: [
    "conflict",
    "The task's branch was not merged and nothing changed; the message says " +
      "why (conflicting files, a dirty checkout, a moved base, a deleted branch).",
  ],
  no_matching_agents: [
    "conflict",
    "No agent in the domain matches the task's runtime and capabilities; enroll one first.",
  ],
  parent_invalid: [
    "invalid",
    "A task's depends_on names a task that does not exist, is in another " +
      "domain or is not claimable; name claimable tasks of the same domain.",
  ],
  parent_failed: [
    "conflict",
    "A parent of the task failed or was cancelled; retry that parent " +
      "(its dependents come back with it) or depend on another task.",
  ],
  pipeline_invalid: [
    "invalid",
    "The pipeline file is malformed; the message names the line " +
      "and what to fix (docs/pipelines.md). Nothing was created.",
  ],
  payload_too_large: ["too_large", "The request body is larger than the limit."],
  rate_limited: ["rate_limited", "Too many requests; wait for the reset time."],
  internal: ["internal", "Internal error; see the tower log."],
  unavailable: ["unavailable", "The service is not available right now; retry shortly."],
  node_offline: ["unavailable", "The agent's node is not connected."],
  runtime_missing: ["unavailable", "The runtime's executable was not found on this node."],
} as const satisfies Record<string, readonly [ErrorClass, string]>;

export type ErrorCode = keyof typeof ERROR_CATALOG;

export class EpError extends Error {
  override readonly name = "EpError";
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;

  /** `options.cause`: the error this one stands for (kept for logs and stacks, never sent to clients). */
  constructor(code: ErrorCode, message?: string, details?: Record<string, unknown>, options?: { cause?: unknown }) {
    super(message ?? ERROR_CATALOG[code][1], options);
    this.code = code;
    this.details = details;
  }

  get errorClass(): ErrorClass {
    return ERROR_CATALOG[this.code][0];
  }

  get httpStatus(): number {
    return ERROR_CLASSES[this.errorClass].http;
  }

  get exitCode(): number {
    return ERROR_CLASSES[this.errorClass].exit;
  }

  get jsonRpcCode(): number {
    return ERROR_CLASSES[this.errorClass].jsonRpc;
  }

  toJSON(): { error: { code: string; message: string; details: Record<string, unknown> } } {
    return { error: { code: this.code, message: this.message, details: this.details ?? {} } };
  }

  /**
   * The error for Connect, gRPC and gRPC-Web: the class's status code, EP's code and details as the typed ErrorDetail.
   */
  toConnectError(): ConnectError {
    const details = (this.details ? JSON.parse(JSON.stringify(this.details)) : {}) as JsonObject;
    return new ConnectError(this.message, ERROR_CLASSES[this.errorClass].connect, undefined, [
      { desc: ErrorDetailSchema, value: { code: this.code, details } },
    ]);
  }
}

export function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERROR_CATALOG, code);
}

/** A status code's class when the error carries no ErrorDetail: the first class mapped to it. */
const connectToClass = new Map<Code, ErrorClass>();
for (const [k, v] of Object.entries(ERROR_CLASSES) as [ErrorClass, ClassMapping][])
  if (!connectToClass.has(v.connect)) connectToClass.set(v.connect, k);

/** Rebuilds an EpError from whatever a client received (Connect error, JSON body, or anything). */
export function toEpError(err: unknown): EpError {
  if (err instanceof EpError) return err;
  if (err instanceof ConnectError) {
    const [detail] = err.findDetails(ErrorDetailSchema);
    if (detail && isErrorCode(detail.code)) {
      const details = detail.details && Object.keys(detail.details).length ? detail.details : undefined;
      return new EpError(detail.code, err.rawMessage, details, { cause: err });
    }
    const cls = connectToClass.get(err.code);
    if (err.code === Code.Unavailable || err.code === Code.DeadlineExceeded)
      return new EpError("unavailable", err.rawMessage, undefined, { cause: err });
    const fallback: Record<ErrorClass, ErrorCode> = {
      invalid: "invalid_argument",
      unauthenticated: "unauthenticated",
      forbidden: "forbidden",
      not_found: "not_found",
      method_not_allowed: "method_not_allowed",
      conflict: "conflict",
      too_large: "payload_too_large",
      rate_limited: "rate_limited",
      internal: "internal",
      unavailable: "unavailable",
    };
    return new EpError(cls ? fallback[cls] : "internal", err.rawMessage, undefined, { cause: err });
  }
  // the original keeps its stack as the cause: a log line of an internal error shows where it began
  return new EpError("internal", err instanceof Error ? err.message : String(err), undefined, { cause: err });
}

/** Shorthand for the most common error: a request field that is wrong. */
export function invalidField(field: string, message: string): EpError {
  return new EpError("invalid_argument", `${field}: ${message}`, { field });
}
