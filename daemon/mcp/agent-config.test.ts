import { lstatSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { MCP_CONFIG_FILE, writeRunMcpConfig } from "./agent-config.js";

const roots: string[] = [];
afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});
const dirOf = () => {
  const d = mkdtempSync(join(tmpdir(), "ep-mcp-config-"));
  roots.push(d);
  return d;
};
const read = (path: string) => JSON.parse(readFileSync(path, "utf8")).mcpServers.ep;

describe("a run's MCP config file", () => {
  it("is written 0600 with the run's URL and its bearer token", () => {
    const dir = dirOf();
    const path = writeRunMcpConfig(dir, { url: "http://127.0.0.1:4100/mcp", token: "epr_one" });
    expect(path).toBe(join(dir, MCP_CONFIG_FILE));
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(read(path)).toEqual({
      type: "http",
      url: "http://127.0.0.1:4100/mcp",
      headers: { Authorization: "Bearer epr_one" },
    });
  });

  it("replaces a previous run's config in place, longer or shorter, leaving nothing of it", () => {
    const dir = dirOf();
    const path = join(dir, MCP_CONFIG_FILE);
    writeFileSync(path, JSON.stringify({ old: "x".repeat(5000) }), { mode: 0o600 });
    const ino = statSync(path).ino;
    writeRunMcpConfig(dir, { url: "http://127.0.0.1:4100/mcp", token: "epr_".padEnd(300, "x") });
    expect(statSync(path).ino).toBe(ino);
    expect(read(path).headers.Authorization).toBe(`Bearer ${"epr_".padEnd(300, "x")}`);
    writeRunMcpConfig(dir, { url: "http://127.0.0.1:4100/mcp", token: "epr_two" });
    expect(JSON.parse(readFileSync(path, "utf8"))).toEqual({
      mcpServers: {
        ep: { type: "http", url: "http://127.0.0.1:4100/mcp", headers: { Authorization: "Bearer epr_two" } },
      },
    });
  });

  it("is never written through a symlink left in its place", () => {
    const dir = dirOf();
    const target = join(dir, "elsewhere.txt");
    writeFileSync(target, "precious\n");
    symlinkSync(target, join(dir, MCP_CONFIG_FILE));
    expect(() => writeRunMcpConfig(dir, { url: "http://127.0.0.1:1/mcp", token: "epr_x" })).toThrow(/ELOOP/);
    expect(readFileSync(target, "utf8")).toBe("precious\n");
    expect(lstatSync(join(dir, MCP_CONFIG_FILE)).isSymbolicLink()).toBe(true);
  });
});
