// Reading the event log. Following it live (SSE, WebSocket, Connect stream) builds on this.
import { create } from "@bufbuild/protobuf";
import * as pb from "../../../gen/ep/tower/v1/events_pb.js";
import { RateLimitSchema } from "../../../gen/ep/tower/v1/resources_pb.js";
import { EpError, invalidField } from "../../../common/errors.js";
import type { EventQuery } from "../../store/store.js";
import { authorize, scopeDomains, type Caller } from "../caller.js";
import { eventMsg } from "../convert.js";
import type { Deps } from "../deps.js";
import type { StreamFrame } from "./frames.js";
import type { RateLimitInfo } from "./limiter.js";
import { EVENT_TYPES } from "./params.js";
import type { EventStream, StreamEnd, StreamSink } from "./types.js";
import { timestampOf } from "../../../common/vocab.js";

export function eventQuery(
  caller: Caller,
  afterId: bigint | number,
  filter: pb.EventFilter | undefined,
  limit?: number,
): EventQuery {
  const types = filter?.types ?? [];
  types.forEach((t, i) => {
    if (!EVENT_TYPES.includes(t as (typeof EVENT_TYPES)[number]))
      throw invalidField(`filter.types[${i}]`, `must be one of ${EVENT_TYPES.join(", ")}`);
  });
  const domainId = filter?.domainId || undefined;
  if (domainId) authorize(caller, "read", { domainId });
  else authorize(caller, "read");
  return {
    afterId: Number(afterId),
    limit,
    types,
    domainId,
    // a caller confined to some domains reads only their events
    domainIds: domainId ? undefined : scopeDomains(caller),
    missionId: filter?.missionId || undefined,
    agentId: filter?.agentId || undefined,
    sessionId: filter?.sessionId || undefined,
    taskId: filter?.taskId || undefined,
  };
}

/** A slow Connect client is cut off once this many bytes of events wait for it. */
const CONNECT_QUEUE_BYTES = 1024 * 1024;

function endError(why: StreamEnd): EpError {
  if (why.code === "token_revoked" || why.code === "token_expired" || why.code === "unauthenticated")
    return new EpError(why.code, why.message);
  return new EpError("unavailable", `${why.message} (${why.code}; resume with after_id=${why.last_event_id})`, {
    reason: why.code,
    last_event_id: why.last_event_id,
  });
}

export function createEventService(deps: Deps, stream?: EventStream) {
  return {
    /** The feed as a Connect server-stream; after_id 0 starts at the newest event. */
    async *streamEvents(
      caller: Caller,
      req: pb.StreamEventsRequest,
      signal: AbortSignal,
    ): AsyncGenerator<pb.StreamEventsResponse> {
      if (!stream) throw new EpError("unavailable", "the event stream is not running on this tower");
      const filter = req.filter;
      const admission = await stream.admit(caller, {
        afterId: req.afterId > 0n ? Number(req.afterId) : undefined,
        filter: {
          types: filter?.types,
          domainId: filter?.domainId,
          missionId: filter?.missionId,
          agentId: filter?.agentId,
          sessionId: filter?.sessionId,
          taskId: filter?.taskId,
        },
      });
      const queue: { frame: StreamFrame; rateLimit: RateLimitInfo | undefined }[] = [];
      let bytes = 0;
      let ended: { why: StreamEnd | undefined } | undefined;
      let wake: (() => void) | undefined;
      let drainWaiters: (() => void)[] = [];
      const poke = () => {
        const w = wake;
        wake = undefined;
        w?.();
      };
      const sink: StreamSink = {
        send(frame, rateLimit) {
          queue.push({ frame, rateLimit });
          bytes += frame.json.length;
          poke();
        },
        buffered: () => bytes,
        drained: () => new Promise<void>((resolve) => (bytes === 0 || ended ? resolve() : drainWaiters.push(resolve))),
        keepAlive() {},
        rateLimited() {},
        end(why) {
          ended = { why };
          for (const d of drainWaiters) d();
          drainWaiters = [];
          poke();
        },
      };
      const sub = stream.attach(admission, sink);
      const onAbort = () => sub.close();
      signal.addEventListener("abort", onAbort, { once: true });
      try {
        for (;;) {
          const item = queue.shift();
          if (item) {
            bytes -= item.frame.json.length;
            if (bytes < CONNECT_QUEUE_BYTES / 2 && drainWaiters.length) {
              for (const d of drainWaiters) d();
              drainWaiters = [];
            }
            const event = eventMsg(item.frame.row);
            if (item.rateLimit) {
              event.rateLimit = create(RateLimitSchema, {
                limit: item.rateLimit.limit,
                remaining: item.rateLimit.remaining,
                resetAt: timestampOf(item.rateLimit.reset_at),
              });
            }
            yield create(pb.StreamEventsResponseSchema, { event });
            continue;
          }
          if (ended) {
            if (ended.why) throw endError(ended.why);
            return;
          }
          await new Promise<void>((resolve) => (wake = resolve));
        }
      } finally {
        signal.removeEventListener("abort", onAbort);
        sub.close();
      }
    },

    async listEvents(caller: Caller, req: pb.ListEventsRequest): Promise<pb.ListEventsResponse> {
      if (req.limit < 0 || req.limit > 10_000) throw invalidField("limit", "must be between 0 and 10000");
      const q = eventQuery(caller, req.afterId, req.filter, req.limit || 100);
      return create(pb.ListEventsResponseSchema, { events: (await deps.store.listEvents(q)).map(eventMsg) });
    },
  };
}
