// A real HTTP receiver for webhook tests and the webhook bench: records each request (headers
// and the raw body) and answers with the status `answer()` picks (200 unless told otherwise).
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  json: any;
}

export interface Receiver {
  url: string;
  received: Received[];
  /** the status for the next request (n: how many came before it) */
  answer: (n: number) => number;
  close(): Promise<void>;
}

export async function startReceiver(answer: (n: number) => number = () => 200): Promise<Receiver> {
  const received: Received[] = [];
  const r: Receiver = { url: "", received, answer, close: async () => {} };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const status = r.answer(received.length);
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      received.push({ headers: req.headers, body, json });
      res.writeHead(status, { "content-type": "text/plain" }).end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  r.url = `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`;
  r.close = () => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve())));
  return r;
}

/**
 * The receiver's check, written from docs/webhooks.md ("Verifying a delivery") and not from the
 * tower's code: HMAC-SHA256 of "<t>.<raw body>" under the secret, compared in constant time, and
 * the timestamp no older than `toleranceS`.
 */
export function verifySignature(
  secret: string,
  header: string | undefined,
  body: string,
  nowMs = Date.now(),
  toleranceS = 300,
): boolean {
  const parts = Object.fromEntries((header ?? "").split(",").map((kv) => kv.split("=", 2) as [string, string]));
  const t = Number(parts.t);
  if (!Number.isInteger(t) || !parts.v1) return false;
  if (Math.abs(nowMs / 1000 - t) > toleranceS) return false;
  const expected = createHmac("sha256", secret).update(`${t}.${body}`).digest();
  const given = Buffer.from(parts.v1, "hex");
  return given.length === expected.length && timingSafeEqual(given, expected);
}
