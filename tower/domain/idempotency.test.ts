// Idempotent creates on both dialects: the key is stored with the create, a retry gets the first
// answer (nothing new made, no second event), another request with the key is refused, the key
// lives 24 h, and two replicas racing on one key make one task.
import { randomBytes } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import type { EpError } from "../../common/errors.js";
import { silentLogger } from "../../common/log.js";
import * as authpb from "../../gen/ep/tower/v1/auth_pb.js";
import { Role } from "../../gen/ep/tower/v1/resources_pb.js";
import * as pb from "../../gen/ep/tower/v1/work_pb.js";
import { FakeClock } from "../../test-support/fake-clock.js";
import { expectEpError, storeSuite, T0 } from "../../test-support/store-suite.js";
import type { Store } from "../store/store.js";
import { createAuth } from "./auth/auth.js";
import { createAuthService } from "./auth/service.js";
import type { Caller } from "./caller.js";
import { DEFAULT_LIMITS, type Deps } from "./deps.js";
import { createEventHub } from "./event-hub.js";
import { checkIdempotencyKey, IDEMPOTENCY_TTL_MS, requestHash } from "./idempotency.js";
import { createKeyring, parseSecretKey } from "./secrets/crypto.js";
import { createWorkService } from "./work/work.js";

const operator: Caller = { subject: "tok_1", principal: "ci", role: "operator", via: "token" };
const admin: Caller = { subject: "tok_0", principal: "root", role: "admin", via: "token" };

storeSuite((s) => {
  const setup = (store: Store = s.store, clock = new FakeClock(T0)) => {
    const deps: Deps = { store, clock, hub: createEventHub(), log: silentLogger, limits: DEFAULT_LIMITS };
    return { deps, clock, work: createWorkService(deps) };
  };
  const newTask = (
    missionId: string,
    over: { title?: string; input?: Record<string, string>; requestId?: string } = {},
  ) =>
    create(pb.CreateTaskRequestSchema, {
      missionId,
      title: "build",
      runtime: 1,
      input: { command: "true" },
      requestId: "key-1",
      ...over,
    });

  describe("idempotency keys", () => {
    s.test("the store keeps a key until it expires, and a live key is not replaced", async () => {
      const row = { scope: "m p", key: "k", requestHash: "h1", response: "{}", createdMs: T0, expiresMs: T0 + 1000 };
      expect(await s.store.putIdempotencyKey(row)).toBe(true);
      expect(await s.store.findIdempotencyKey("m p", "k", T0 + 999)).toEqual(row);
      expect(await s.store.findIdempotencyKey("m q", "k", T0)).toBeUndefined();
      expect(await s.store.putIdempotencyKey({ ...row, requestHash: "h2", createdMs: T0 + 500 })).toBe(false);
      expect((await s.store.findIdempotencyKey("m p", "k", T0))!.requestHash).toBe("h1");
      // expired: gone for readers, replaced by the next use of the key, swept
      expect(await s.store.findIdempotencyKey("m p", "k", T0 + 1000)).toBeUndefined();
      expect(
        await s.store.putIdempotencyKey({ ...row, requestHash: "h3", createdMs: T0 + 1000, expiresMs: T0 + 2000 }),
      ).toBe(true);
      expect((await s.store.findIdempotencyKey("m p", "k", T0 + 1500))!.requestHash).toBe("h3");
      await s.store.putIdempotencyKey({ ...row, key: "old", expiresMs: T0 + 10 });
      expect(await s.store.sweepIdempotencyKeys(T0 + 1500)).toBe(1);
      expect(await s.store.findIdempotencyKey("m p", "k", T0 + 1500)).toBeDefined();
    });

    s.test("the same create twice with one key makes one task, and the second answer is the first", async () => {
      const { work, deps } = setup();
      const d = await s.domain();
      const m = await s.mission(d);
      const events: string[] = [];
      deps.hub.subscribe((es) => events.push(...es.map((e) => e.name)));
      const first = await work.createTask(operator, newTask(m));
      const again = await work.createTask(operator, newTask(m, { input: { command: "true" } }));
      expect(again).toEqual(first);
      expect((await s.store.listTasks({ missionId: m })).map((t) => t.id)).toEqual([first.task!.id]);
      expect(events.filter((n) => n === "task.created")).toHaveLength(1);
      // another key, or no key: a new task
      await work.createTask(operator, newTask(m, { requestId: "key-2" }));
      await work.createTask(operator, newTask(m, { requestId: "" }));
      expect(await s.store.listTasks({ missionId: m })).toHaveLength(3);
    });

    s.test("the same key with another request is refused with idempotency_key_reused", async () => {
      const { work } = setup();
      const m = await s.mission(await s.domain());
      await work.createTask(operator, newTask(m));
      await expect(work.createTask(operator, newTask(m, { title: "deploy" }))).rejects.toSatisfy(
        expectEpError("idempotency_key_reused"),
      );
      // the key belongs to its method and principal: elsewhere it is a fresh key
      await work.createMission(
        operator,
        create(pb.CreateMissionRequestSchema, {
          domainId: (await s.store.getMission(m))!.domainId,
          title: "x",
          requestId: "key-1",
        }),
      );
      await work.createTask({ ...operator, principal: "other" }, newTask(m, { title: "deploy" }));
      expect(await s.store.listTasks({ missionId: m })).toHaveLength(2);
    });

    s.test("a key lasts 24 hours: after that the same request creates again", async () => {
      const { work, clock } = setup();
      const m = await s.mission(await s.domain());
      const first = await work.createTask(operator, newTask(m));
      clock.advance(IDEMPOTENCY_TTL_MS - 1);
      expect((await work.createTask(operator, newTask(m))).task!.id).toBe(first.task!.id);
      clock.advance(1);
      expect((await work.createTask(operator, newTask(m))).task!.id).not.toBe(first.task!.id);
    });

    s.test("a create that fails records no key: the retry runs it again", async () => {
      const { work } = setup();
      await s.domain("taken");
      await expect(
        work.createDomain(admin, create(pb.CreateDomainRequestSchema, { name: "taken", requestId: "k" })),
      ).rejects.toSatisfy(expectEpError("already_exists"));
      expect(await s.store.findIdempotencyKey("WorkService.CreateDomain admin root", "k", T0)).toBeUndefined();
      const made = await work.createDomain(
        admin,
        create(pb.CreateDomainRequestSchema, { name: "fresh", requestId: "k" }),
      );
      expect(
        await work.createDomain(admin, create(pb.CreateDomainRequestSchema, { name: "fresh", requestId: "k" })),
      ).toEqual(made);
    });

    s.test("two replicas racing on one key make one task and give both callers its answer", async () => {
      const other = await s.fx.openAnother();
      const a = setup(s.store);
      const b = setup(other);
      const m = await s.mission(await s.domain());
      const answers = await Promise.all(
        Array.from({ length: 6 }, (_, i) => (i % 2 ? a : b).work.createTask(operator, newTask(m))),
      );
      expect(new Set(answers.map((r) => r.task!.id)).size).toBe(1);
      expect(await s.store.listTasks({ missionId: m })).toHaveLength(1);
    });

    s.test("a token created twice with one key is one token, its secret replayed but stored sealed", async () => {
      const { deps } = setup();
      const ring = createKeyring(parseSecretKey(randomBytes(32).toString("base64"), "test"));
      const auth = createAuth(deps, { issuer: "http://tower.test", keyRotationMs: 86_400_000, keyring: () => ring });
      const service = createAuthService(auth, deps, () => ring);
      const req = create(authpb.CreateTokenRequestSchema, { name: "ci", role: Role.OPERATOR, requestId: "tok-key" });
      const first = await service.createToken(admin, req);
      expect(await service.createToken(admin, req)).toEqual(first);
      expect((await s.store.listTokens()).filter((t) => t.name === "ci")).toHaveLength(1);
      const row = await s.store.findIdempotencyKey("AuthService.CreateToken admin root", "tok-key", T0);
      expect(row!.response).not.toContain(first.secret);
      // no secret-store key: the secret cannot be stored, so the create runs without its key
      const keyless = createAuthService(auth, deps, () => undefined);
      await keyless.createToken(admin, { ...req, name: "ci2", requestId: "k2" });
      expect(await s.store.findIdempotencyKey("AuthService.CreateToken admin root", "k2", T0)).toBeUndefined();
    });
  });
});

describe("idempotency key shape", () => {
  const refusal = (key: string) => {
    try {
      checkIdempotencyKey(key, "Idempotency-Key", "Idempotency-Key header");
      return "ok";
    } catch (err) {
      return (err as EpError).message;
    }
  };
  it("names the field and says what is wrong", () => {
    expect(refusal("0b6f8c2e-7a4d-4a57-9f1c-6a0f0c1d2e3f")).toBe("ok");
    expect(refusal("with inner space")).toBe("ok");
    expect(refusal("")).toMatch(/^Idempotency-Key header: is empty/);
    expect(refusal("x".repeat(256))).toMatch(/^Idempotency-Key header: is 256 characters long; at most 255/);
    expect(refusal("x".repeat(255))).toBe("ok");
    expect(refusal("a\u0000b")).toMatch(/printable ASCII/);
    expect(refusal(" lead")).toMatch(/printable ASCII/);
    expect(refusal("é")).toMatch(/printable ASCII/);
  });
  it("the request hash ignores the key and the order of an object's keys", () => {
    const a = create(pb.CreateTaskRequestSchema, {
      missionId: "m",
      title: "t",
      input: { a: 1, b: 2 },
      requestId: "k1",
    });
    const b = create(pb.CreateTaskRequestSchema, {
      missionId: "m",
      title: "t",
      input: { b: 2, a: 1 },
      requestId: "k2",
    });
    expect(requestHash(pb.CreateTaskRequestSchema, a)).toBe(requestHash(pb.CreateTaskRequestSchema, b));
    expect(requestHash(pb.CreateTaskRequestSchema, a)).not.toBe(
      requestHash(pb.CreateTaskRequestSchema, { ...a, title: "u" } as typeof a),
    );
  });
});
