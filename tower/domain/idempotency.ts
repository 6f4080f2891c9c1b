// Idempotent creates: a create request may carry a key (Connect: `request_id`; REST: the
// Idempotency-Key header, which the edge copies into it). The key is written in the create's own
// transaction with the request's hash and the first answer, so a create never lands without its
// key nor a key without its create. A retry within IDEMPOTENCY_TTL_MS with the same key, by the
// same principal on the same method, gets that first answer again (nothing is created, no event
// is emitted); the same key with another request is refused with idempotency_key_reused.
import { createHash } from "node:crypto";
import { clone, fromJson, toJson, type DescMessage, type JsonValue, type MessageShape } from "@bufbuild/protobuf";
import { EpError } from "../../common/errors.js";
import { iso } from "../../common/clock.js";
import type { Store } from "../store/store.js";
import type { Caller } from "./caller.js";
import type { Deps } from "./deps.js";
import { commit, type Emit } from "./event-hub.js";

/** How long a key holds its first answer. */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;
/** The longest key accepted (characters). */
export const MAX_IDEMPOTENCY_KEY = 255;
/** Expired keys are swept at most this often by each tower process. */
const SWEEP_EVERY_MS = 10 * 60_000;

/**
 * A key's shape: 1 to 255 printable ASCII characters (spaces only inside). `field` names where
 * it came from (request_id on Connect, Idempotency-Key on REST) and `what` says it in the message.
 */
export function checkIdempotencyKey(key: string, field: string, what = field): void {
  const refuse = (why: string) => new EpError("invalid_argument", `${what}: ${why}`, { field });
  if (key === "") throw refuse("is empty; send a fresh unique value (a UUID) or leave it out");
  if (key.length > MAX_IDEMPOTENCY_KEY)
    throw refuse(`is ${key.length} characters long; at most ${MAX_IDEMPOTENCY_KEY}`);
  if (!/^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(key)) {
    throw refuse("must be printable ASCII (no control characters, no leading or trailing spaces)");
  }
}

/** Seals the stored answer when it holds a secret (a new token's), and opens it on a replay. */
export interface AnswerSealer {
  seal(text: string): string;
  unseal(text: string): string;
}

export interface IdempotentCall<I extends DescMessage, O extends DescMessage> {
  caller: Caller;
  /** the method, as `Service.Method`: a key means something only for one method */
  method: string;
  input: I;
  request: MessageShape<I> & { requestId: string };
  output: O;
  /** undefined when the answer cannot be sealed (no secret-store key): the create then runs unkeyed */
  sealer?: () => AnswerSealer | undefined;
}

export type Idempotent = <I extends DescMessage, O extends DescMessage>(
  call: IdempotentCall<I, O>,
  create: (tx: Store, emit: Emit) => Promise<MessageShape<O>>,
) => Promise<MessageShape<O>>;

/** Runs creates once per key (commit() when the request has no key). */
export function createIdempotency(deps: Deps): Idempotent {
  let lastSweepMs = deps.clock.now();

  function sweepNow(nowMs: number): void {
    if (nowMs - lastSweepMs < SWEEP_EVERY_MS) return;
    lastSweepMs = nowMs;
    deps.store.sweepIdempotencyKeys(nowMs).then(
      (n) => n && deps.log.info("swept expired idempotency keys", { count: n }),
      // the next sweep retries; an expired row is also replaced when its key is used again
      (err: Error) => deps.log.warn("sweeping expired idempotency keys failed", { error: err.message }),
    );
  }

  return async (call, run) => {
    const key = call.request.requestId;
    if (!key) return commit(deps, run);
    checkIdempotencyKey(key, "request_id");
    const sealer = call.sealer ? call.sealer() : undefined;
    if (call.sealer && !sealer) {
      deps.log.warn("no secret-store key: a create whose answer holds a secret runs without its idempotency key", {
        method: call.method,
      });
      return commit(deps, run);
    }
    const scope = `${call.method} ${call.caller.role} ${call.caller.principal ?? call.caller.subject}`;
    const hash = requestHash(call.input, call.request);

    const answer = (row: { requestHash: string; response: string; createdMs: number }) => {
      if (row.requestHash !== hash) {
        throw new EpError(
          "idempotency_key_reused",
          `idempotency key ${JSON.stringify(key)} was used at ${iso(row.createdMs)} ` +
            `with another ${call.method} request; send a fresh key for a new request`,
          { field: "request_id" },
        );
      }
      const text = sealer ? sealer.unseal(row.response) : row.response;
      return fromJson(call.output, JSON.parse(text) as JsonValue);
    };

    try {
      return await commit(deps, async (tx, emit) => {
        const nowMs = deps.clock.now();
        const prior = await tx.findIdempotencyKey(scope, key, nowMs);
        if (prior) return answer(prior);
        const res = await run(tx, emit);
        const text = JSON.stringify(toJson(call.output, res));
        const stored = await tx.putIdempotencyKey({
          scope,
          key,
          requestHash: hash,
          response: sealer ? sealer.seal(text) : text,
          createdMs: nowMs,
          expiresMs: nowMs + IDEMPOTENCY_TTL_MS,
        });
        // a concurrent request with this key committed first (another replica): undo this create
        if (!stored)
          throw new EpError(
            "conflict",
            `a concurrent ${call.method} request with idempotency key ${JSON.stringify(key)} won`,
          );
        sweepNow(nowMs);
        return res;
      });
    } catch (err) {
      // the create failed; if it lost to a concurrent request with the same key (its insert hit
      // the row that request made: a name taken, the key taken), that request's answer is ours
      if (!(err instanceof EpError) || err.errorClass !== "conflict" || err.code === "idempotency_key_reused")
        throw err;
      const winner = await deps.store.findIdempotencyKey(scope, key, deps.clock.now());
      if (!winner) throw err;
      return answer(winner);
    }
  };
}

/** SHA-256 of the request's canonical JSON without its key: the same request hashes the same. */
export function requestHash<I extends DescMessage>(
  schema: I,
  request: MessageShape<I> & { requestId: string },
): string {
  const bare = clone(schema, request) as MessageShape<I> & { requestId: string };
  bare.requestId = "";
  return createHash("sha256")
    .update(canonical(toJson(schema, bare)))
    .digest("hex");
}

/** JSON with object keys sorted, so a body's key order does not change its hash. */
function canonical(v: JsonValue): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v !== null && typeof v === "object") {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, JsonValue>)[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v);
}
