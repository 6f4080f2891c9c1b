// An xterm.js terminal attached to an agent's PTY through the tower (docs/attach.md): a one-time
// ticket, /api/attach-ws, binary frames both ways, JSON control frames, resizes from a fit addon,
// and a resume with the byte offset reached when the socket drops. Loaded on demand.
import { FitAddon } from "@xterm/addon-fit";
import { Terminal } from "@xterm/xterm";
import "@xterm/xterm/css/xterm.css";
import { useEffect, useRef, useState } from "react";
import { api, describeError } from "../api.js";

type Frame = { type: string; [k: string]: unknown };

export default function AgentTerminal({ agentId }: { agentId: string }) {
  const box = useRef<HTMLDivElement>(null);
  const [status, setStatus] = useState("connecting…");

  useEffect(() => {
    const el = box.current!;
    const term = new Terminal({
      cursorBlink: true,
      fontSize: 13,
      scrollback: 5000,
      convertEol: false,
      theme: { background: "#0b0e14" },
    });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(el);
    fit.fit();
    const encoder = new TextEncoder();
    let ws: WebSocket | undefined;
    let offset: number | undefined;
    let finished = false;
    let tries = 0;
    let retry: ReturnType<typeof setTimeout> | undefined;

    const connect = async (since: number | undefined) => {
      let ticket: string;
      try {
        ticket = (await api.auth.createTicket({ purpose: "attach", agentId })).ticket;
      } catch (err) {
        setStatus(`could not attach: ${describeError(err)}`);
        return;
      }
      if (finished) return;
      const q = new URLSearchParams({ ticket, cols: String(term.cols), rows: String(term.rows) });
      if (since !== undefined) q.set("since", String(since));
      const sock = new WebSocket(`${location.origin.replace(/^http/, "ws")}/api/attach-ws?${q}`);
      sock.binaryType = "arraybuffer";
      ws = sock;
      let ended = false;
      sock.onmessage = (ev) => {
        if (typeof ev.data !== "string") {
          const bytes = new Uint8Array(ev.data as ArrayBuffer);
          if (offset !== undefined) offset += bytes.length;
          term.write(bytes);
          return;
        }
        const f = JSON.parse(ev.data) as Frame;
        if (f.type === "status") setStatus(f.state === "dialing" ? "waiting for the node…" : "connected");
        else if (f.type === "hello") {
          tries = 0;
          offset = Number(f.offset);
          if (f.reset) term.reset();
          setStatus(f.mode === "ro" ? "connected, read-only" : "connected");
        } else if (f.type === "run") {
          setStatus(`following run ${String(f.task_id)}`);
        } else if (f.type === "exit") {
          const how =
            `${String(f.reason)}${f.exit_code !== undefined ? `, exit status ${String(f.exit_code)}` : ""}` +
            `${f.signal ? `, signal ${String(f.signal)}` : ""}`;
          term.write(`\r\n\x1b[2m[${f.task_id ? `run ${String(f.task_id)}: ` : ""}${how}]\x1b[0m\r\n`);
          if (!f.task_id) {
            ended = true;
            setStatus(`ended: ${how}`);
          }
        } else if (f.type === "error") {
          ended = true;
          setStatus(`${String(f.code)}: ${String(f.message)}`);
        }
      };
      sock.onclose = () => {
        if (finished || ended) return;
        // dropped: resume with what we missed, a few times
        if (++tries > 5) return setStatus("disconnected");
        setStatus("reconnecting…");
        retry = setTimeout(() => void connect(offset), Math.min(1000 * 2 ** (tries - 1), 8000));
      };
    };

    const input = term.onData((d) => ws?.readyState === WebSocket.OPEN && ws.send(encoder.encode(d)));
    const binary = term.onBinary(
      (d) => ws?.readyState === WebSocket.OPEN && ws.send(Uint8Array.from(d, (c) => c.charCodeAt(0))),
    );
    const resized = term.onResize(
      ({ cols, rows }) => ws?.readyState === WebSocket.OPEN && ws.send(JSON.stringify({ type: "resize", cols, rows })),
    );
    const observer = new ResizeObserver(() => fit.fit());
    observer.observe(el);
    void connect(undefined);
    term.focus();
    return () => {
      finished = true;
      if (retry) clearTimeout(retry);
      observer.disconnect();
      input.dispose();
      binary.dispose();
      resized.dispose();
      ws?.close();
      term.dispose();
    };
  }, [agentId]);

  return (
    <div className="agent-terminal">
      <div className="muted small" role="status" data-terminal-status>
        {status}
      </div>
      <div
        ref={box}
        className="agent-terminal-screen"
        data-agent-terminal={agentId}
        style={{ height: "24rem", padding: "4px", background: "#0b0e14", borderRadius: "6px" }}
      />
    </div>
  );
}
