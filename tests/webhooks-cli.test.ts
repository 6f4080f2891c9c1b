// `ep webhook add|ls|rm|test|deliveries` as the built CLI against a real tower and a real
// receiver: the secret printed once and verifying the test delivery, the log's table, a domain
// given by name, and bad flags refused with exit 2 naming them.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WorkService } from "../gen/ep/tower/v1/work_pb.js";
import { assertBuilt, ep } from "./cli-helpers.js";
import { freePort, startTower, type TestTower } from "./harness.js";
import { startReceiver, verifySignature, type Receiver } from "./webhook-receiver.js";

let t: TestTower;
let r: Receiver;
let env: Record<string, string>;
let domainId: string;

beforeAll(async () => {
  assertBuilt();
  t = await startTower({
    env: {
      EP_SECRET_KEY: "cli",
      EP_WEBHOOK_BACKOFF_MS: "20",
      EP_WEBHOOK_BACKOFF_MAX_MS: "40",
      EP_WEBHOOK_POLL_MS: "20",
    },
  });
  r = await startReceiver();
  env = { EP_BASE_URL: t.url, EP_TOKEN: t.adminToken, EP_HOME: t.home };
  domainId = (await t.client(WorkService).createDomain({ name: "cli-hooks" })).domain!.id;
});

afterAll(async () => {
  await r?.close();
  await t?.close();
});

describe("ep webhook (built CLI)", () => {
  it(
    "add prints the secret once; test delivers and the receiver " +
      "verifies it; deliveries and ls show it; rm removes it",
    async () => {
      const add = await ep(
        [
          "webhook",
          "add",
          r.url,
          "--domain",
          "cli-hooks",
          "--event",
          "task.failed,permission.requested",
          "--description",
          "pager",
        ],
        { env },
      );
      expect(add.code, add.stderr).toBe(0);
      const id = /added webhook (whk_\w+)/.exec(add.stdout)![1];
      const secret = /^(whsec_\S+)$/m.exec(add.stdout)![1];
      expect(add.stdout).toContain("shown only now");

      const test = await ep(["webhook", "test", id, "--domain", domainId], { env });
      expect(test.code, test.stderr).toBe(0);
      expect(test.stdout).toMatch(/^delivered whd_\w+: the receiver answered 200/);
      expect(r.received).toHaveLength(1);
      expect(r.received[0].headers["ep-event"]).toBe("webhook.test");
      expect(verifySignature(secret, r.received[0].headers["ep-signature"] as string, r.received[0].body)).toBe(true);

      const log = await ep(["webhook", "deliveries", id, "--domain", "cli-hooks"], { env });
      expect(log.code).toBe(0);
      expect(log.stdout).toMatch(/^ID\s+EVENT\s+STATUS\s+ATTEMPTS\s+CODE/);
      expect(log.stdout).toMatch(/webhook\.test\s+succeeded\s+1\s+200/);

      const ls = await ep(["webhook", "ls", "--domain", "cli-hooks"], { env });
      expect(ls.stdout).toContain(id);
      expect(ls.stdout).toContain("task.failed,permission.requested");
      expect(ls.stdout).not.toContain(secret);
      const json = await ep(["webhook", "ls", "--domain", domainId, "--json"], { env });
      expect(json.json().webhooks[0]).toMatchObject({ id, url: r.url, format: "ep", description: "pager" });

      expect((await ep(["webhook", "rm", id, "--domain", domainId], { env })).stdout).toContain(
        `deleted webhook ${id}`,
      );
      const gone = await ep(["webhook", "rm", id, "--domain", domainId], { env });
      expect(gone.code).toBe(4);
      expect(gone.stderr).toMatch(/no webhook .* in domain/);
    },
  );

  it("a receiver that is down: test exits 1 saying why and that it retries", async () => {
    const dead = `http://127.0.0.1:${await freePort()}/down`;
    const add = await ep(["webhook", "add", dead, "--domain", domainId, "--event", "task.failed", "--json"], { env });
    const id = add.json().webhook.id as string;
    const test = await ep(["webhook", "test", id, "--domain", domainId], { env });
    expect(test.code).toBe(1);
    expect(test.stdout).toMatch(/failed \(1 attempt\): ECONNREFUSED.*retrying/);
    const failed = await ep(["webhook", "deliveries", id, "--domain", domainId, "--status", "pending", "--json"], {
      env,
    });
    expect(failed.code).toBe(0);
  });

  it("bad flags and input are refused with the reason", async () => {
    const cases: [string[], number, RegExp][] = [
      [["webhook", "ls"], 2, /needs --domain <id\|name>/],
      [["webhook", "ls", "--domain", "nope"], 4, /domain nope does not exist/],
      [["webhook", "add", "--domain", domainId, "--event", "task.failed"], 2, /./],
      [["webhook", "add", r.url, "--domain", domainId], 2, /--event is required/],
      [
        ["webhook", "add", r.url, "--domain", domainId, "--event", "task.failed", "--format", "teams"],
        2,
        /--format must be ep or slack/,
      ],
      [
        ["webhook", "add", "ftp://x/y", "--domain", domainId, "--event", "task.failed"],
        2,
        /url: must use http or https/,
      ],
      [
        ["webhook", "add", r.url, "--domain", domainId, "--event", "task.boom"],
        2,
        /"task.boom" is not an event a webhook can receive/,
      ],
      [
        ["webhook", "deliveries", "whk_x", "--domain", domainId, "--status", "late"],
        2,
        /--status must be pending, succeeded or failed/,
      ],
      [
        ["webhook", "deliveries", "whk_x", "--domain", domainId, "--limit", "0"],
        2,
        /--limit must be a whole number from 1 to 1000/,
      ],
      [["webhook", "test"], 2, /./],
    ];
    for (const [args, code, message] of cases) {
      const res = await ep(args, { env });
      expect(res.code, `ep ${args.join(" ")}: ${res.stdout}${res.stderr}`).toBe(code);
      expect(res.stderr, `ep ${args.join(" ")}`).toMatch(message);
    }
  });
});
