import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../common/log.js";
import { loadSchemaPack, payloadKindOf, validatePayload } from "./schema-pack.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "ep-schema-pack-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function capturingLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const log = createLogger("test", {
    level: "debug",
    write: (line) => lines.push(JSON.parse(line) as Record<string, unknown>),
  });
  return { log, warnings: () => lines.filter((l) => l.level === "warn") };
}

async function packFile(name: string, content: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, content);
  return path;
}

describe("schema pack", () => {
  it("uses the embedded defaults when no pack is configured", () => {
    const { log, warnings } = capturingLogger();
    const pack = loadSchemaPack(undefined, log);
    expect(pack.source).toBe("embedded");
    expect(pack.warning).toBeUndefined();
    expect(warnings()).toHaveLength(0);
    expect(validatePayload(pack, "create_mission", { domain_id: "dom_1", title: "Ship it" })).toBeUndefined();
  });

  it("rejects a violating payload with an error naming the JSON path", () => {
    const pack = loadSchemaPack(undefined, capturingLogger().log);
    const err = validatePayload(pack, "create_mission", { domain_id: "dom_1", title: 42 });
    expect(err?.code).toBe("invalid_argument");
    expect(err?.message).toContain("/title: must be string");
    expect(err?.details).toMatchObject({
      field: "/title",
      tool: "create_mission",
      kind: "mission",
      schema_pack: "embedded",
      errors: [{ path: "/title", message: "must be string" }],
    });
  });

  it("names a missing required field by its path and lists every problem", () => {
    const pack = loadSchemaPack(undefined, capturingLogger().log);
    const err = validatePayload(pack, "submit_mesh_task", { priority: "high", capabilities: ["gpu", 3] });
    expect(err?.message).toContain("/title: is required");
    expect(err?.message).toContain("/priority: must be integer");
    expect(err?.message).toContain("/capabilities/1: must be string");
  });

  it("checks each payload kind and lets other tools through", () => {
    const pack = loadSchemaPack(undefined, capturingLogger().log);
    expect(validatePayload(pack, "create_domain", {})?.message).toContain("/name: is required");
    expect(validatePayload(pack, "put_doc", {})?.message).toContain("/: must NOT have fewer than 1 properties");
    expect(validatePayload(pack, "put_artifact", { task_id: "tsk_1", name: "out.txt", content: "ok" })).toBeUndefined();
    expect(validatePayload(pack, "list_missions", { anything: 1 })).toBeUndefined();
    expect(payloadKindOf("toString")).toBeUndefined();
  });

  it("applies a pack from a file, keeping the defaults for kinds it leaves out", async () => {
    const { log, warnings } = capturingLogger();
    const path = await packFile(
      "strict.json",
      JSON.stringify({
        $comment: "our team's rules",
        mission: {
          type: "object",
          required: ["title", "owner"],
          properties: { owner: { type: "string", pattern: "^@" } },
        },
      }),
    );
    const pack = loadSchemaPack(path, log);
    expect(pack.source).toBe(path);
    expect(warnings()).toHaveLength(0);
    expect(validatePayload(pack, "create_mission", { title: "a", owner: "bob" })?.message).toContain(
      '/owner: must match pattern "^@"',
    );
    expect(validatePayload(pack, "create_mission", { title: "a", owner: "@bob" })).toBeUndefined();
    expect(validatePayload(pack, "create_domain", {})?.details).toMatchObject({ schema_pack: path, field: "/name" });
  });

  it.each([
    ["not JSON", "{ mission: ", /not valid JSON/],
    ["not an object", "[1, 2]", /must be a JSON object/],
    ["an unknown kind", JSON.stringify({ missions: {} }), /unknown payload kind "missions"/],
    ["a schema that does not compile", JSON.stringify({ task: { type: "no-such-type" } }), /task: .*type/],
    ["a schema that is a string", JSON.stringify({ doc: "object" }), /doc: a schema must be an object/],
  ])("falls back to the embedded defaults with a warning for a pack that is %s", async (_name, content, why) => {
    const { log, warnings } = capturingLogger();
    const path = await packFile(`broken-${_name.replace(/\W+/g, "-")}.json`, content);
    const pack = loadSchemaPack(path, log);
    expect(pack.source).toBe("embedded");
    expect(pack.warning).toMatch(why);
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]).toMatchObject({ path });
    expect(String(warnings()[0].msg)).toContain("using the embedded defaults");
    // The fallback really validates.
    expect(validatePayload(pack, "create_mission", { title: 1 })?.message).toContain("/title: must be string");
  });

  it("falls back with a warning when the pack file is missing", () => {
    const { log, warnings } = capturingLogger();
    const pack = loadSchemaPack(join(dir, "absent.json"), log);
    expect(pack.source).toBe("embedded");
    expect(pack.warning).toMatch(/cannot read the file/);
    expect(warnings()).toHaveLength(1);
  });
});
