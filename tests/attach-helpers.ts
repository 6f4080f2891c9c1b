// A terminal client for the attach tests and the bench: a WebSocket speaking the attach
// protocol, its output interpreted by @xterm/headless so tests read the screen a user would see.
import xtermHeadless from "@xterm/headless";
import { WebSocket } from "ws";
import { waitFor } from "./harness.js";

const { Terminal } = xtermHeadless as unknown as typeof import("@xterm/headless");

export interface AttachClient {
  ws: WebSocket;
  /** Control frames received, in order. */
  frames: Record<string, any>[];
  /** Bytes of terminal output received (the resume offset is hello.offset + bytes). */
  bytes(): number;
  offset(): number;
  /** The visible screen and scrollback as text. */
  screen(): Promise<string>;
  type(text: string): void;
  resize(cols: number, rows: number): void;
  waitScreen(pred: (screen: string) => boolean, ms?: number): Promise<string>;
  waitFrame(type: string, ms?: number): Promise<Record<string, any>>;
  closed: Promise<{ code: number; reason: string }>;
  close(): void;
}

export interface OpenResult {
  client?: AttachClient;
  /** HTTP status of a refused upgrade, and its JSON body. */
  status?: number;
  body?: any;
}

/** Opens an attach WebSocket (ws:// URL or ws+unix://…:/attach?…); a refused upgrade resolves with its status. */
export function openAttach(
  url: string,
  opts: { headers?: Record<string, string>; cols?: number; rows?: number } = {},
): Promise<OpenResult> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: opts.headers, perMessageDeflate: false });
    const term = new Terminal({
      cols: opts.cols ?? 80,
      rows: opts.rows ?? 24,
      allowProposedApi: true,
      scrollback: 5000,
    });
    const frames: Record<string, any>[] = [];
    let bytes = 0;
    let pendingWrite = Promise.resolve();
    const closed = new Promise<{ code: number; reason: string }>((r) =>
      ws.on("close", (code, reason) => r({ code, reason: reason.toString() })),
    );
    ws.on("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body += d.toString()));
      res.on("end", () => {
        let parsed: unknown = body;
        try {
          parsed = JSON.parse(body);
        } catch {
          // not JSON
        }
        resolve({ status: res.statusCode, body: parsed });
      });
    });
    ws.on("error", (err) => reject(err));
    ws.on("message", (data: Buffer, isBinary) => {
      if (isBinary) {
        bytes += data.length;
        const chunk = new Uint8Array(data);
        pendingWrite = pendingWrite.then(() => new Promise<void>((r) => term.write(chunk, r)));
      } else {
        const f = JSON.parse(data.toString()) as Record<string, any>;
        frames.push(f);
        if (f.type === "hello" && f.reset) term.reset();
      }
    });
    const screen = async () => {
      await pendingWrite;
      const buf = term.buffer.active;
      const lines: string[] = [];
      for (let i = 0; i < buf.length; i++) lines.push(buf.getLine(i)?.translateToString(true) ?? "");
      return lines.join("\n");
    };
    ws.on("open", () => {
      const client: AttachClient = {
        ws,
        frames,
        bytes: () => bytes,
        offset: () => (frames.find((f) => f.type === "hello")?.offset ?? 0) + bytes,
        screen,
        type: (text) => ws.send(Buffer.from(text), { binary: true }),
        resize(cols, rows) {
          term.resize(cols, rows);
          ws.send(JSON.stringify({ type: "resize", cols, rows }));
        },
        async waitScreen(pred, ms = 10_000) {
          let last = "";
          try {
            await waitFor(async () => pred((last = await screen())), ms);
          } catch (err) {
            throw new Error(`screen never matched; it shows:\n${last}\nframes: ${JSON.stringify(frames)}`, {
              cause: err,
            });
          }
          return last;
        },
        async waitFrame(type, ms = 10_000) {
          await waitFor(() => frames.some((f) => f.type === type), ms);
          return frames.find((f) => f.type === type)!;
        },
        closed,
        close: () => ws.close(),
      };
      resolve({ client });
    });
  });
}

export async function mustOpen(url: string, opts?: Parameters<typeof openAttach>[1]): Promise<AttachClient> {
  const r = await openAttach(url, opts);
  if (!r.client) throw new Error(`attach refused: ${r.status} ${JSON.stringify(r.body)}`);
  return r.client;
}

export const wsUrl = (httpUrl: string) => httpUrl.replace(/^http/, "ws");
export const unixAttachUrl = (sock: string, query: string) => `ws+unix://${sock}:/attach?${query}`;
