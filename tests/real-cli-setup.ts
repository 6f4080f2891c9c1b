// The setting of the real agent CLIs (tests/real-cli/node_modules) against the fake LLM API
// (@copilotkit/aimock): the fake API started on a free loopback port, each vendor's own settings
// in runtimes.toml (API key and base URL only), and the CLIs' own config files in a user home.
// Shared by tests/real-cli.test.ts's setting and bench/agent-overhead.ts.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./epd-harness.js";
import { freePort, stopChild, waitFor } from "./harness.js";

export const REAL_CLI_DIR = join(ROOT, "tests", "real-cli");
export const REAL_CLI_BIN = join(REAL_CLI_DIR, "node_modules", ".bin");

/** The names among `names` that tests/real-cli/node_modules/.bin lacks. */
export const missingClis = (names: string[]) => names.filter((name) => !existsSync(join(REAL_CLI_BIN, name)));

/** llmock serving tests/real-cli/fixtures on a free loopback port, ready when its journal answers. */
export async function startLlmock(): Promise<{ url: string; child: ChildProcess; log(): string; stop(): Promise<void> }> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(join(REAL_CLI_BIN, "llmock"), ["-p", String(port), "-h", "127.0.0.1", "-f", join(REAL_CLI_DIR, "fixtures")], { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  child.stdout!.on("data", (d: Buffer) => (log += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (log += d.toString()));
  await waitFor(async () => {
    if (child.exitCode !== null) throw new Error(`aimock exited: ${log}`);
    return (await fetch(`${url}/__aimock/journal`).catch(() => undefined))?.ok === true;
  }, 15_000);
  return { url, child, log: () => log, stop: () => stopChild(child, "SIGTERM") };
}

/**
 * The CLIs' own config files, where they need one: codex's provider (the fake API speaks the
 * Responses API over HTTP, not its websocket), gemini's auth type.
 */
export function writeCliConfigs(userHome: string, llmUrl: string): void {
  mkdirSync(join(userHome, ".codex"), { recursive: true });
  writeFileSync(
    join(userHome, ".codex", "config.toml"),
    `model_provider = "fake"\n[model_providers.fake]\nname = "fake"\nbase_url = "${llmUrl}/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\nsupports_websockets = false\n`,
  );
  mkdirSync(join(userHome, ".gemini"), { recursive: true });
  writeFileSync(join(userHome, ".gemini", "settings.json"), JSON.stringify({ security: { auth: { selectedType: "gemini-api-key" } } }));
}

/** runtimes.toml with nothing but each vendor's own settings (and, for ACP, which agent runs). */
export function runtimesToml(llmUrl: string, acp: "claude-code-acp" | "gemini" = "claude-code-acp", acpSettings = ""): string {
  const anthropic = `ANTHROPIC_BASE_URL = "${llmUrl}"\nANTHROPIC_API_KEY = "test-key"\n`;
  const gemini = `GEMINI_API_KEY = "test-key"\nGOOGLE_GEMINI_BASE_URL = "${llmUrl}"\nGEMINI_MODEL = "gemini-2.5-flash"\n`;
  return [
    `[vendorA_code.env]\n${anthropic}`,
    `[vendorB.env]\nOPENAI_API_KEY = "test-key"\n`,
    `[vendorC.env]\n${gemini}`,
    acp === "gemini"
      ? `[vendorA_agent_acp]\ncommand = "gemini"\nargs = ["--acp"]\n${acpSettings}[vendorA_agent_acp.env]\n${gemini}`
      : `[vendorA_agent_acp]\n${acpSettings}[vendorA_agent_acp.env]\n${anthropic}`,
  ].join("\n");
}
