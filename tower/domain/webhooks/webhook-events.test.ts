import { describe, expect, it } from "vitest";
import { checkWebhookUrl, shownUrl } from "./webhook-service.js";
import { deliveryBody, slackMessage, summaryOf } from "./webhook-events.js";
import { signatureHeader, signatureOf } from "./webhook-signature.js";

describe("webhook bodies", () => {
  const chunk = {
    id: 9,
    type: "matrix",
    name: "task.failed",
    domain_id: "dom_1",
    mission_id: "msn_1",
    agent_id: "",
    task_id: "tsk_1",
    status: "failed",
    payload: { title: "a <b> & c", reason: "exit 1" },
  };

  it("ep: the event as the feed sends it, with the webhook and delivery ids", () => {
    expect(JSON.parse(deliveryBody("ep", { webhookId: "whk_1", deliveryId: "whd_1" }, chunk))).toEqual({
      webhook_id: "whk_1",
      delivery_id: "whd_1",
      event: chunk,
    });
  });

  it("slack: a sentence as text, escaped mrkdwn in the blocks, the ids in the context", () => {
    const m = slackMessage(chunk);
    expect(m.text).toBe('Task "a <b> & c" failed: exit 1');
    expect(m.blocks[0]).toEqual({
      type: "section",
      text: { type: "mrkdwn", text: 'Task "a &lt;b&gt; &amp; c" failed: exit 1' },
    });
    expect(JSON.stringify(m.blocks[1])).toContain("tsk_1");
    expect(JSON.stringify(m.blocks[1])).not.toContain("agent"); // empty fields are left out
    expect(summaryOf({ name: "permission.requested", payload: { tool: "Bash", title: "rm -rf build" } })).toMatch(
      /^An agent asks to run Bash: rm -rf build/,
    );
  });
});

describe("signatures", () => {
  it("HMAC-SHA256 of t.body, hex, in t=…,v1=…", () => {
    // the reference value from `printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac whsec_test`
    expect(signatureOf("whsec_test", 1700000000, '{"a":1}')).toBe(
      "38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789",
    );
    expect(signatureHeader("whsec_test", 1_700_000_000_999, '{"a":1}')).toBe(
      "t=1700000000,v1=38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789",
    );
  });
});

describe("receiver URLs", () => {
  it("absolute http(s) only, without credentials or fragment; viewers see the origin", () => {
    expect(checkWebhookUrl("https://Hooks.Example.com/a?b=1")).toBe("https://hooks.example.com/a?b=1");
    expect(() => checkWebhookUrl("javascript:alert(1)")).toThrow(/must use http or https \(got javascript\)/);
    expect(() => checkWebhookUrl("https://x.test/#frag")).toThrow(/#fragment/);
    expect(() => checkWebhookUrl("/relative")).toThrow(/not an absolute URL/);
    expect(shownUrl("https://hooks.slack.test/services/T/B/X", false)).toBe("https://hooks.slack.test/…");
    expect(shownUrl("https://hooks.slack.test/", false)).toBe("https://hooks.slack.test");
    expect(shownUrl("https://hooks.slack.test/services/T/B/X", true)).toBe("https://hooks.slack.test/services/T/B/X");
  });
});
