// The fan-out's MQTT subscription: each message on the configured topics becomes a local
// `mqtt` event (JSON payloads as objects, anything else as text). Loaded only when configured.
import type { Logger } from "../../common/log.js";

export function createMqttSource(
  cfg: { url: string; topics: readonly string[] },
  log: Logger,
  emit: (body: Record<string, unknown>) => void,
) {
  let client: { end(force?: boolean, cb?: () => void): unknown; connected: boolean } | undefined;
  let messages = 0;
  return {
    async start(): Promise<void> {
      const { connect } = await import("mqtt");
      const c = connect(cfg.url, {
        reconnectPeriod: 1000,
        connectTimeout: 10_000,
        clientId: `epd-fanout-${process.pid}-${Math.random().toString(36).slice(2, 8)}`,
      });
      client = c;
      const topics = [...cfg.topics];
      c.on("connect", () => {
        c.subscribe(topics, { qos: 0 }, (err) => {
          if (err) log.warn("MQTT subscribe failed", { error: err.message, topics });
          else log.info("MQTT subscribed", { topics });
        });
      });
      c.on("error", (err: Error) => log.warn("MQTT error", { error: err.message }));
      c.on("message", (topic: string, payload: Buffer) => {
        messages++;
        const text = payload.toString("utf8");
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          body = { text };
        }
        emit({
          type: "mqtt",
          name: "mqtt.message",
          topic,
          payload: body !== null && typeof body === "object" && !Array.isArray(body) ? body : { value: body },
        });
      });
      await new Promise<void>((resolve) => {
        // do not block start on a broker that is down; MQTT.js keeps reconnecting
        const t = setTimeout(resolve, 2000);
        c.once("connect", () => {
          clearTimeout(t);
          resolve();
        });
      });
    },
    stats: () => ({ url: cfg.url, connected: client?.connected ?? false, topics: [...cfg.topics], messages }),
    async close(): Promise<void> {
      if (client) await new Promise<void>((r) => client!.end(true, () => r()));
    },
  };
}
