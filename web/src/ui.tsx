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

/** A time for people: relative ("3 min ago"), the absolute local time on hover. */
export function Ago({ iso, now }: { iso?: string; now: number }) {
  const t = iso ? Date.parse(iso) : NaN;
  const title = Number.isNaN(t) ? iso || undefined : new Date(t).toLocaleString();
  return (
    <time dateTime={iso || undefined} title={title}>
      {relativeTime(iso, now)}
    </time>
  );
}

/** "850 ms", "12 s", "3 min 5 s", "2 h 4 min". */
export function duration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ""}`;
  return `${Math.floor(s / 3600)} h${Math.floor((s % 3600) / 60) ? ` ${Math.floor((s % 3600) / 60)} min` : ""}`;
}

/** Dollars: four decimals under $1 (agent runs cost cents), two above. */
export const usd = (v: number) => `$${v >= 1 ? v.toFixed(2) : v.toFixed(4)}`;

/** What people call each runtime kind; the kind itself stays in tooltips and the API. */
export const RUNTIME_LABELS: Record<string, string> = {
  vendorA_code: "Claude Code",
  vendorA_agent_acp: "ACP agent",
  vendorB: "Codex",
  vendorC: "Gemini CLI",
  muxhost_hosted: "Claude in tmux",
  shell: "Shell",
};

export function runtimeLabel(kind: string): string {
  return RUNTIME_LABELS[kind] ?? kind;
}

/** A link inside the console: follows without a page load (the router listens to popstate). */
export function AppLink({
  href,
  children,
  className,
}: {
  href: string;
  children: React.ReactNode;
  className?: string;
}) {
  return (
    <a
      href={href}
      className={className}
      onClick={(e) => {
        if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        const [path, hash] = href.split("#");
        if (path !== window.location.pathname) {
          window.history.pushState(null, "", href);
          window.dispatchEvent(new PopStateEvent("popstate"));
        }
        if (hash) window.setTimeout(() => document.getElementById(hash)?.scrollIntoView({ block: "start" }), 50);
      }}
    >
      {children}
    </a>
  );
}

const TOOL_VERBS: Record<string, string> = {
  list: "Listed",
  get: "Looked up",
  create: "Create",
  submit: "Submit",
  retry: "Retry",
  cancel: "Cancel",
  put: "Write",
  claim: "Claim",
  signal: "Signal",
  restart: "Restart",
  pause: "Pause",
  resume: "Resume",
};

/** A tool as people read it: list_missions → "Listed missions", submit_mesh_task → "Submit task". */
export function toolLabel(tool: string): string {
  const [verb, ...rest] = tool.split("_");
  const noun = rest
    .filter((w) => w !== "mesh")
    .join(" ")
    .replace(/\bdoc\b/, "document");
  return `${TOOL_VERBS[verb] ?? verb.charAt(0).toUpperCase() + verb.slice(1)} ${noun}`.trim();
}

/** A small button that copies an id, for the places that show a name instead. */
export function CopyId({ id }: { id: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <button
      type="button"
      className="copy-id"
      title={copied ? "Copied" : `Copy ${id}`}
      aria-label={`Copy id ${id}`}
      onClick={() => {
        void navigator.clipboard?.writeText(id).then(() => {
          setCopied(true);
          window.setTimeout(() => setCopied(false), 1500);
        });
      }}
    >
      {copied ? (
        "✓"
      ) : (
        <svg
          width="12"
          height="12"
          viewBox="0 0 16 16"
          aria-hidden="true"
          fill="none"
          stroke="currentColor"
          strokeWidth="1.5"
        >
          <rect x="5" y="5" width="9" height="9" rx="1.5" />
          <path d="M11 5V3.5A1.5 1.5 0 0 0 9.5 2h-6A1.5 1.5 0 0 0 2 3.5v6A1.5 1.5 0 0 0 3.5 11H5" />
        </svg>
      )}
    </button>
  );
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
