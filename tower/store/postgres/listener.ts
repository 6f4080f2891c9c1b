// The LISTEN side of cross-replica signalling: one dedicated connection shared by every
// subscription of a store, re-established with backoff when it drops.
import pg from "pg";
import { EpError } from "../../../common/errors.js";
import { quoteIdent } from "./pg-support.js";

/** One LISTEN connection per store, outside the pool, re-established with backoff. */
export class Listener {
  private client: pg.Client | undefined;
  private connecting: Promise<pg.Client> | undefined;
  private readonly handlers = new Map<string, Set<(payload: string) => void>>();
  private readonly reconnectHandlers = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;
  private delayMs: number;
  private closed = false;

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly firstDelayMs: number,
    private readonly maxDelayMs: number,
  ) {
    this.delayMs = firstDelayMs;
  }

  async subscribe(
    channel: string,
    onPayload: (payload: string) => void,
    onReconnect?: () => void,
  ): Promise<() => Promise<void>> {
    if (this.closed) throw new EpError("unavailable", "the store is closed");
    let set = this.handlers.get(channel);
    const fresh = !set;
    if (!set) this.handlers.set(channel, (set = new Set()));
    set.add(onPayload);
    if (onReconnect) this.reconnectHandlers.add(onReconnect);
    const unsubscribe = async (): Promise<void> => {
      if (onReconnect) this.reconnectHandlers.delete(onReconnect);
      const current = this.handlers.get(channel);
      if (!current?.delete(onPayload) || current.size) return;
      this.handlers.delete(channel);
      // the connection is down: a new one LISTENs only to the channels still wanted
      await this.client?.query(`UNLISTEN ${quoteIdent(channel)}`).catch(() => {});
    };
    try {
      const client = this.client ?? (await (this.connecting ??= this.open()));
      // open() listened to every channel known when it ran; a newer one is added here.
      if (fresh) await client.query(`LISTEN ${quoteIdent(channel)}`);
    } catch (err) {
      await unsubscribe();
      if (err instanceof EpError) throw err;
      throw new EpError(
        "unavailable",
        `cannot listen on PostgreSQL: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    return unsubscribe;
  }

  private async open(): Promise<pg.Client> {
    const client = new pg.Client(this.config);
    client.on("notification", (msg) => {
      for (const fn of this.handlers.get(msg.channel) ?? []) {
        try {
          fn(msg.payload ?? "");
        } catch {
          // A subscriber's bug must not stop delivery to the others.
        }
      }
    });
    client.on("error", () => this.lost(client));
    client.on("end", () => this.lost(client));
    try {
      await client.connect();
      for (const channel of this.handlers.keys()) await client.query(`LISTEN ${quoteIdent(channel)}`);
    } catch (err) {
      client.removeAllListeners("end");
      await client.end().catch(() => {}); // the connect error is thrown; closing the half-open client is best effort
      throw err;
    } finally {
      this.connecting = undefined;
    }
    if (this.closed) {
      await client.end().catch(() => {}); // closed while connecting: nobody wants this connection
      throw new EpError("unavailable", "the store is closed");
    }
    this.client = client;
    return client;
  }

  private lost(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = undefined;
    client.removeAllListeners("end");
    client.end().catch(() => {}); // the connection is lost already; schedule() reconnects
    this.schedule();
  }

  private schedule(): void {
    if (this.closed || this.timer || !this.handlers.size) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.closed || this.client || this.connecting) return;
      (this.connecting = this.open()).then(
        () => {
          this.delayMs = this.firstDelayMs;
          for (const fn of this.reconnectHandlers) {
            try {
              fn();
            } catch {
              // Same as notifications: one subscriber cannot break the others.
            }
          }
        },
        () => {
          this.delayMs = Math.min(this.delayMs * 2, this.maxDelayMs);
          this.schedule();
        },
      );
    }, this.delayMs);
    this.timer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const client = this.client ?? (await this.connecting?.catch(() => undefined));
    this.client = undefined;
    if (client) {
      client.removeAllListeners("end");
      await client.end().catch(() => {}); // closing: a dead connection needs no goodbye
    }
  }
}
