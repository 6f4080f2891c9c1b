// permission = "ask" in the ACP client: what the agent is answered for each outcome of asking a person.
import type { RequestPermissionRequest } from "@agentclientprotocol/sdk";
import { describe, expect, it } from "vitest";
import { silentLogger } from "../../common/log.js";
import { askPerson, decidePermission, rejectionOf, toolOf } from "./acp-permission.js";
import type { PermissionAsk } from "./runtime.js";

const req: RequestPermissionRequest = {
  sessionId: "s",
  toolCall: { toolCallId: "tc1", title: "touch x", rawInput: { command: "touch /repo/x" } },
  options: [
    { kind: "allow_always", name: "Always Allow", optionId: "allow_always" },
    { kind: "allow_once", name: "Allow", optionId: "allow" },
    { kind: "reject_once", name: "Reject", optionId: "reject" },
  ],
};
const known = new Map([["tc1", "Bash"]]);
const base = { logger: silentLogger, permissionTimeoutMs: 1234 };

describe("askPerson", () => {
  it("puts the call before a person and answers with their option", async () => {
    let asked: PermissionAsk | undefined;
    const answer = await askPerson(
      req,
      {
        ...base,
        askPermission: async (ask) => (
          (asked = ask), { approved: true, optionId: "allow_always", approvalId: "apr_1", note: "" }
        ),
      },
      new AbortController().signal,
      known,
    );
    expect(answer).toEqual({ outcome: { outcome: "selected", optionId: "allow_always" } });
    expect(asked).toEqual({
      tool: "Bash",
      title: "touch x",
      arguments: { command: "touch /repo/x" },
      paths: ["/repo/x"],
      options: req.options.map(({ optionId, name, kind }) => ({ optionId, name, kind })),
      timeoutMs: 1234,
    });
  });

  it(
    "answers the agent's own reject option for a rejection, " +
      "an expiry, an unknown option, no tower and a tower error",
    async () => {
      const reject = { outcome: { outcome: "selected", optionId: "reject" } };
      const signal = new AbortController().signal;
      expect(
        await askPerson(
          req,
          { ...base, askPermission: async () => ({ approved: false, optionId: "reject", approvalId: "a", note: "" }) },
          signal,
        ),
      ).toEqual(reject);
      expect(
        await askPerson(
          req,
          { ...base, askPermission: async () => ({ approved: false, approvalId: "a", note: "expired" }) },
          signal,
        ),
      ).toEqual(reject);
      expect(
        await askPerson(
          req,
          {
            ...base,
            askPermission: async () => ({ approved: true, optionId: "not-offered", approvalId: "a", note: "" }),
          },
          signal,
        ),
      ).toEqual({ outcome: { outcome: "selected", optionId: "allow" } });
      expect(await askPerson(req, base, signal)).toEqual(reject);
      expect(
        await askPerson(req, { ...base, askPermission: async () => Promise.reject(new Error("tower away")) }, signal),
      ).toEqual(reject);
    },
  );

  it("answers cancelled when the turn is cancelled while a person decides", async () => {
    const ac = new AbortController();
    const pending = askPerson(
      req,
      {
        ...base,
        askPermission: (_ask, signal) =>
          new Promise((_, fail) => signal.addEventListener("abort", () => fail(new Error("stopped")))),
      },
      ac.signal,
    );
    ac.abort();
    expect(await pending).toEqual({ outcome: { outcome: "cancelled" } });
  });

  it(
    "names the tool from the request, else from the agent's tool_call " +
      "update, else generically; without a person 'ask' rejects",
    () => {
      expect(
        toolOf({ ...req, toolCall: { ...req.toolCall, _meta: { claudeCode: { toolName: "Edit" } } } }, known),
      ).toBe("Edit");
      expect(toolOf(req, known)).toBe("Bash");
      expect(toolOf({ ...req, toolCall: { ...req.toolCall, kind: "execute" } })).toBe("execute");
      expect(toolOf(req)).toBe("tool");
      expect(decidePermission(req, "ask", "/repo")).toEqual({ outcome: { outcome: "selected", optionId: "reject" } });
    },
  );

  it(
    "a rejection is the run's denial: a person's under ask, " + "the policy's otherwise; an allow or a cancel is none",
    () => {
      const reject = { outcome: { outcome: "selected", optionId: "reject" } } as const;
      expect(rejectionOf(req, reject, "ask", known)).toEqual({
        tool: "Bash",
        tried: "touch /repo/x",
        reason: expect.stringContaining("a person said no"),
        source: "person",
        callId: "tc1",
      });
      expect(rejectionOf(req, reject, "workspace", known)).toMatchObject({
        source: "policy",
        reason: expect.stringContaining("outside the run's workspace"),
      });
      expect(rejectionOf(req, { outcome: { outcome: "selected", optionId: "allow" } }, "ask", known)).toBeUndefined();
      expect(rejectionOf(req, { outcome: { outcome: "cancelled" } }, "ask", known)).toBeUndefined();
    },
  );
});
