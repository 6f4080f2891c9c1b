// A run's redactor: what the agent fetched is cut out of its result, its denials included.
import { describe, expect, it } from "vitest";
import { silentLogger } from "../../common/log.js";
import { createSessionTable } from "../worker/sessions.js";
import { createSecretsBroker } from "./broker.js";

describe("a run's redactor", () => {
  it("redacts a fetched value from the output, the error and the denials", async () => {
    const sessions = createSessionTable();
    const session = sessions.open({ taskId: "tsk_1", agentId: "agt_1", domainId: "dom_1" });
    const broker = createSecretsBroker({ sessions, resolve: async () => "s3cr3t-value-42", log: silentLogger });
    const redactor = broker.redactor(session.id);
    expect(await broker.getSecret(session.id, "API_KEY")).toBe("s3cr3t-value-42");
    const r = redactor.result({
      ok: true,
      output: "used s3cr3t-value-42",
      denials: [
        {
          tool: "Bash",
          tried: "curl -H 'x-key: s3cr3t-value-42' https://x",
          reason: "needs approval",
          source: "policy",
          callId: "t1",
        },
      ],
    });
    expect(JSON.stringify(r)).not.toContain("s3cr3t-value-42");
    expect(r.denials![0]).toMatchObject({ tool: "Bash", reason: "needs approval", source: "policy", callId: "t1" });
    expect(r.denials![0]!.tried).toMatch(/^curl -H 'x-key: .+' https:\/\/x$/);
    redactor.release();
    broker.close();
  });
});
