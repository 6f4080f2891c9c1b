// Small shared pieces: status badges, times, notices.
import { useEffect, useState } from "react";

const TONES: Record<string, "ok" | "warn" | "bad" | "info"> = {
  succeeded: "ok",
  done: "ok",
  idle: "ok",
  online: "ok",
  approved: "ok",
  open: "ok",
  active: "ok",
  queued: "info",
  todo: "info",
  registered: "info",
  starting: "info",
  claimed: "warn",
  running: "warn",
  in_progress: "warn",
  busy: "warn",
  pending: "warn",
  restarting: "warn",
  review: "warn",
  paused: "warn",
  failed: "bad",
  dead: "bad",
  rejected: "bad",
  cancelled: "bad",
  offline: "bad",
  blocked: "bad",
};

export function toneOf(status: string): string {
  return TONES[status] ?? "neutral";
}

export function StatusBadge({ status }: { status: string }) {
  if (!status || status === "—") return <span className="muted">—</span>;
  return <span className={`badge badge-${toneOf(status)}`}>{status}</span>;
}

export function relativeTime(iso: string | undefined, now: number): string {
  if (!iso) return "never";
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  const s = Math.round((now - t) / 1000);
  if (s < 5) return "just now";
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86_400)} d ago`;
}

/** The current time, refreshed every few seconds, for "x ago" labels. */
export function useNow(everyMs = 10_000): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const h = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(h);
  }, [everyMs]);
  return now;
}

export function Ago({ iso, now }: { iso?: string; now: number }) {
  return <time dateTime={iso || undefined} title={iso || undefined}>{relativeTime(iso, now)}</time>;
}

export function ErrorNote({ error }: { error?: string }) {
  if (!error) return null;
  return (
    <p className="error-note" role="alert">
      {error}
    </p>
  );
}

export function Empty({ children }: { children: React.ReactNode }) {
  return <p className="empty muted">{children}</p>;
}
