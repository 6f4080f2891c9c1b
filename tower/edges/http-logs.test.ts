// The tower's log lines through pino: JSON with the level's word, and the request's id on every
// line logged while serving it — also after the body was read and across awaits.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { asyncContextIsCheap, createLogger } from "../../common/log.js";
import { loadConfig } from "../config.js";
import { createHttpApp, handleErrors } from "./http.js";

const apps: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  for (const a of apps.splice(0)) await a.close();
});

function app(level: "debug" | "info" = "debug") {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger("tower", { level, write: (l) => lines.push(JSON.parse(l)) });
  const config = loadConfig({ listen: "127.0.0.1:0" }, { EP_HOME: mkdtempSync(join(tmpdir(), "ep-logs-")) });
  const a = createHttpApp(config, log);
  apps.push(a);
  return { a, log, lines };
}

describe("tower log lines", () => {
  it("are JSON with level, ts, component and msg; fields stay fields; debug only at debug", () => {
    const lines: string[] = [];
    const log = createLogger("epd", { level: "info", write: (l) => lines.push(l) });
    log.debug("not shown");
    log.child({ node_id: "nod_1" }).warn("link down", { attempt: 3 });
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0])).toEqual({
      level: "warn",
      ts: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      component: "epd",
      node_id: "nod_1",
      attempt: 3,
      msg: "link down",
    });
  });

  it(
    "carry the request's id on every line logged while serving " +
      "it, after the body and across awaits, and none outside",
    async () => {
      const { a, log, lines } = app();
      a.post("/t", async (req) => {
        log.info("handler start");
        await new Promise<void>((r) => setImmediate(r));
        log.child({ part: "domain" }).warn("deeper", { body: req.body });
        return { id: req.id };
      });
      await a.ready();
      const res = await a.inject({ method: "POST", url: "/t?ticket=secret-ticket", payload: { x: 1 } });
      const other = await a.inject({ method: "POST", url: "/t", payload: { x: 2 } });
      log.info("outside");
      const ids = [res.json().id, other.json().id];
      expect(ids[0]).not.toBe(ids[1]);
      const mine = lines.filter((l) => l.msg === "handler start" || l.msg === "deeper");
      expect(mine.map((l) => l.req_id)).toEqual([ids[0], ids[0], ids[1], ids[1]]);
      expect(lines.find((l) => l.msg === "outside")).not.toHaveProperty("req_id");
      expect(JSON.stringify(lines)).not.toContain("secret-ticket"); // no line per request with its URL
    },
  );

  it("fastify's own lines about a request name it by req_id, without its credentials or query", async () => {
    const { a, lines } = app();
    a.get("/boom", async (req) => {
      req.log.error({ req }, "handler failed");
      return {};
    });
    await a.ready();
    await a.inject({
      method: "GET",
      url: "/boom?ticket=secret-ticket",
      headers: { authorization: "Bearer ept_secret", cookie: "ep_session=secret" },
    });
    const line = lines.find((l) => l.msg === "handler failed")!;
    expect(line.req_id).toMatch(/^req-/);
    expect(line.req).toMatchObject({ method: "GET", url: "/boom" });
    expect(JSON.stringify(lines)).not.toMatch(/secret/);
  });

  it("a request's logger, bound when it first writes, names the request in its lines and its children's", async () => {
    const { a, lines } = app("info");
    a.get("/quiet", async (req) => ({ id: req.id, level: req.log.level }));
    a.get("/talks", async (req) => {
      req.log.debug("not shown");
      req.log.info({ step: 1 }, "first");
      req.log.child({ part: "edge" }).warn("second");
      return { id: req.id };
    });
    await a.ready();
    const quiet = (await a.inject({ method: "GET", url: "/quiet" })).json();
    const talks = (await a.inject({ method: "GET", url: "/talks" })).json().id as string;
    expect(quiet.level).toBe("info");
    expect(lines.filter((l) => l.req_id === quiet.id)).toEqual([]);
    expect(lines.filter((l) => l.req_id === talks).map((l) => [l.msg, l.step, l.part])).toEqual([
      ["first", 1, undefined],
      ["second", undefined, "edge"],
    ]);
    expect(lines.find((l) => l.msg === "not shown")).toBeUndefined();
  });

  it(
    "at info level the scope is entered only where it is " + "cheap; a failed request's line names it either way",
    async () => {
      const { a, log, lines } = app("info");
      handleErrors(a, 1024, log, []);
      a.post("/t", async (req) => {
        log.child({ part: "domain" }).info("deeper");
        if ((req.body as { fail?: boolean }).fail) throw new Error("broken");
        return { id: req.id };
      });
      await a.ready();
      const ok = (await a.inject({ method: "POST", url: "/t", payload: {} })).json().id as string;
      await a.inject({ method: "POST", url: "/t", payload: { fail: true } });
      const deeper = lines.filter((l) => l.msg === "deeper");
      expect(deeper[0].req_id).toBe(asyncContextIsCheap() ? ok : undefined);
      const failed = lines.find((l) => l.msg === "request failed")!;
      expect(failed).toMatchObject({ level: "error", req_id: expect.stringMatching(/^req-/), error: "broken" });
      expect(failed.req_id).not.toBe(ok);
    },
  );

  it("AsyncLocalStorage is cheap on AsyncContextFrame: Node 24 unless turned off, Node 22 with the flag", () => {
    expect(asyncContextIsCheap("20.20.2", [])).toBe(false);
    expect(asyncContextIsCheap("22.12.0", [])).toBe(false);
    expect(asyncContextIsCheap("22.12.0", ["--experimental-async-context-frame"])).toBe(true);
    expect(asyncContextIsCheap("24.22.3", [])).toBe(true);
    expect(asyncContextIsCheap("24.22.3", ["--no-async-context-frame"])).toBe(false);
  });
});
