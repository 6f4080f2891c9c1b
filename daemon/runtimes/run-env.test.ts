import { describe, expect, it } from "vitest";
import { runEnv } from "./runtime.js";

describe("a run's environment", () => {
  it("runtimes.toml env beats the inherited environment; the run's EP_* variables beat both", () => {
    const inherited = {
      PATH: "/usr/bin",
      IS_SANDBOX: "yes",
      HOME: "/root",
      EP_SECRETS_SESSION: "ses_run",
      EP_TASK_ID: "tsk_1",
    };
    const configured = { IS_SANDBOX: "1", ANTHROPIC_BASE_URL: "http://127.0.0.1:4010", EP_SECRETS_SESSION: "forged" };
    expect(runEnv(configured, inherited)).toEqual({
      PATH: "/usr/bin",
      HOME: "/root",
      IS_SANDBOX: "1",
      ANTHROPIC_BASE_URL: "http://127.0.0.1:4010",
      EP_SECRETS_SESSION: "ses_run",
      EP_TASK_ID: "tsk_1",
    });
  });
});
