// The console's Webhooks tab in Debian's chromium against a real tower and a real receiver: an
// admin adds a webhook (a bad URL is refused on its field; the secret is shown once), sends a
// test that the receiver verifies with that secret, sees the delivery in the log and removes the
// webhook; a viewer sees the list with the URL cut to its origin and no buttons that change it.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuthService } from "../gen/ep/tower/v1/auth_pb.js";
import { Role } from "../gen/ep/tower/v1/resources_pb.js";
import { WebhookDeliveryStatus, WebhookService } from "../gen/ep/tower/v1/webhooks_pb.js";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { CHROMIUM, ensureConsoleBuilt, openConsole } from "./browser.js";
import { startTower, waitFor, type TestTower } from "./harness.js";
import { optionalTool } from "./optional-tools.js";
import { startReceiver, verifySignature, type Receiver } from "./webhook-receiver.js";

const chromiumTool = optionalTool(CHROMIUM, { pkg: "chromium", suite: "web-webhooks" });

let t: TestTower;
let r: Receiver;
let domainId: string;
const profiles: string[] = [];

describe.skipIf(chromiumTool.skip)("the console's Webhooks tab", () => {
  beforeAll(async () => {
    chromiumTool.require();
    await ensureConsoleBuilt();
    t = await startTower({ env: { EP_SECRET_KEY: "web", EP_WEBHOOK_POLL_MS: "50" } });
    r = await startReceiver();
    domainId = (await t.client(WorkService).createDomain({ name: "web-hooks" })).domain!.id;
  }, 90_000);

  afterAll(async () => {
    await r?.close();
    await t?.close();
    for (const p of profiles) rmSync(p, { recursive: true, force: true });
  });

  const open = async (token: string) => {
    const profile = mkdtempSync(join(tmpdir(), "ep-chromium-"));
    profiles.push(profile);
    const ticket = (await t.client(AuthService, token).createTicket({ purpose: "login" })).ticket;
    return openConsole(t.url, ticket, profile);
  };

  it("an admin adds a webhook, sees the secret once, tests it, reads the log and removes it", async () => {
    const { ctx, page, pageErrors } = await open(t.adminToken);
    try {
      await page.getByRole("link", { name: "Webhooks" }).click();
      await page.getByRole("heading", { name: "Webhooks" }).waitFor();
      await page.getByText("No webhooks in this domain.").waitFor();
      await page.getByRole("button", { name: "Add webhook" }).click();
      const form = page.getByRole("form", { name: "New webhook" });
      await form.getByLabel("URL").fill("ftp://nowhere.test/x");
      await form.getByRole("button", { name: "Add webhook" }).click();
      await form.locator('[data-field="url"] .field-error').waitFor();
      expect(await form.locator('[data-field="url"] .field-error').innerText()).toContain(
        "must use http or https (got ftp)",
      );

      await form.getByLabel("URL").fill(r.url);
      await form.getByRole("button", { name: "Add webhook" }).click();
      const shown = page.getByRole("status", { name: "Signing secret" });
      await shown.waitFor();
      const secret = (await shown.locator(".secret-value").innerText()).trim();
      expect(secret).toMatch(/^whsec_/);
      await shown.getByRole("button", { name: "I have copied it" }).click();
      expect(await page.getByRole("status", { name: "Signing secret" }).count()).toBe(0);

      const card = page.getByRole("article", { name: `Webhook ${r.url}` });
      await card.waitFor();
      expect(await card.innerText()).toContain("task.failed, permission.requested");
      await card.getByRole("button", { name: "Send test" }).click();
      await card.locator("table.deliveries tbody tr").first().waitFor();
      // once the tower has recorded the answer, the log's refresh shows it
      const hookId = (await card.getAttribute("data-webhook-id"))!;
      await waitFor(
        async () =>
          (await t.client(WebhookService).listWebhookDeliveries({ domainId, webhookId: hookId })).deliveries[0]
            ?.status === WebhookDeliveryStatus.SUCCEEDED,
      );
      await Promise.all([
        page.waitForResponse((res) => res.url().includes("ListWebhookDeliveries")),
        card.getByRole("button", { name: "Refresh log" }).click(),
      ]);
      await card.locator("table.deliveries").getByText("succeeded").waitFor();
      expect(await card.locator("table.deliveries").innerText()).toMatch(/webhook\.test\s+succeeded\s+1\s+200/);
      expect(r.received).toHaveLength(1);
      expect(verifySignature(secret, r.received[0].headers["ep-signature"] as string, r.received[0].body)).toBe(true);

      page.once("dialog", (d) => void d.accept());
      await card.getByRole("button", { name: "Remove" }).click();
      await page.getByText("No webhooks in this domain.").waitFor();
      expect((await t.client(WebhookService).listWebhooks({ domainId })).webhooks).toEqual([]);
      expect(pageErrors).toEqual([]);
    } finally {
      await ctx.close();
    }
  }, 90_000);

  it("a viewer sees the webhooks with each URL cut to its origin, and nothing to change them", async () => {
    await t.client(WebhookService).createWebhook({
      domainId,
      url: "https://hooks.example.test/services/T1/B2/SECRETPATH",
      events: ["task.failed"],
    });
    const viewer = (await t.client(AuthService).createToken({ name: "web-viewer", role: Role.VIEWER })).secret;
    const { ctx, page, pageErrors } = await open(viewer);
    try {
      await page.getByRole("link", { name: "Webhooks" }).click();
      const card = page.getByRole("article", { name: "Webhook https://hooks.example.test/…" });
      await card.waitFor();
      expect(await page.content()).not.toContain("SECRETPATH");
      expect(await page.getByRole("button", { name: "Add webhook" }).count()).toBe(0);
      expect(await card.getByRole("button", { name: "Send test" }).count()).toBe(0);
      expect(await card.getByRole("button", { name: "Remove" }).count()).toBe(0);
      expect(pageErrors).toEqual([]);
    } finally {
      await ctx.close();
    }
  }, 60_000);
});
