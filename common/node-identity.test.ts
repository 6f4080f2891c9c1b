import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseNodeIdentity, readNodeIdentity, writeNodeIdentity } from "./node-identity.js";

describe("node identity file", () => {
  it("round-trips with mode 0600, creating the directory", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ep-nid-"));
    const path = join(dir, "etc", "ep", "node.json");
    const id = { node_id: "nod_1", hostname: "w1", token: "a.b.c", tower_url: "http://localhost:8008/" };
    await writeNodeIdentity(id, path);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(await readNodeIdentity(path)).toEqual({ ...id, tower_url: "http://localhost:8008" });
    expect(JSON.parse(readFileSync(path, "utf8")).node_id).toBe("nod_1");
    rmSync(dir, { recursive: true });
  });

  it("fails fast on a directory that cannot be made (no endless mkdir under /proc)", async () => {
    const id = { node_id: "nod_1", hostname: "w1", token: "a.b.c", tower_url: "http://localhost:8008" };
    await expect(writeNodeIdentity(id, "/proc/ep-nope/node.json")).rejects.toThrow();
  }, 5_000);

  it("says what is wrong and how to fix it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ep-nid-"));
    await expect(readNodeIdentity(join(dir, "missing.json"))).rejects.toMatchObject({
      code: "config_invalid",
      message: expect.stringMatching(/does not exist; register this node/),
    });
    writeFileSync(join(dir, "bad.json"), "{nope");
    await expect(readNodeIdentity(join(dir, "bad.json"))).rejects.toMatchObject({
      message: expect.stringMatching(/not valid JSON/),
    });
    expect(() => parseNodeIdentity('{"node_id":"n","hostname":"h","token":"t","tower_url":"ftp://x"}')).toThrow(
      /tower_url must be an http/,
    );
    expect(() => parseNodeIdentity('{"node_id":"n","hostname":"h","tower_url":"http://x"}')).toThrow(
      /field token is missing/,
    );
    expect(() => parseNodeIdentity("[]")).toThrow(/JSON object/);
    rmSync(dir, { recursive: true });
  });
});
