import { describe, expect, it } from "vitest";
import { readAiSettings } from "./settings.js";

describe("readAiSettings", () => {
  it("reads the session runtime default and the vendorA_code settings", () => {
    expect(readAiSettings({})).toEqual({ claude: {} });
    expect(
      readAiSettings({
        EP_CENTRAL_RUNTIME_DEFAULT: "vendorA_code",
        EP_CLAUDE_MODEL: "claude-x",
        EP_CLAUDE_MAX_TOKENS: "8000",
        EP_CLAUDE_TIMEOUT_SECONDS: "90",
      }),
    ).toEqual({
      centralRuntimeDefault: "vendorA_code",
      claude: { model: "claude-x", max_tokens: 8000, timeout_seconds: 90 },
    });
  });

  it("names the variable that is wrong", () => {
    expect(() => readAiSettings({ EP_CENTRAL_RUNTIME_DEFAULT: "gpt" })).toThrow(
      /EP_CENTRAL_RUNTIME_DEFAULT must be one of vendorA_code/,
    );
    expect(() => readAiSettings({ EP_CLAUDE_MAX_TOKENS: "-1" })).toThrow(/EP_CLAUDE_MAX_TOKENS/);
    expect(() => readAiSettings({ EP_CLAUDE_MAX_TOKENS: "1.5" })).toThrow(/EP_CLAUDE_MAX_TOKENS/);
    expect(() => readAiSettings({ EP_CLAUDE_TIMEOUT_SECONDS: "later" })).toThrow(/EP_CLAUDE_TIMEOUT_SECONDS/);
  });
});
