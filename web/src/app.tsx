// The console shell: login gate, header (tabs, who, logout, theme toggle at the top right),
// the reconnect banner, and the tab panels. Tabs are paths under /ui/ so reloads keep them.
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { AgentsView } from "./agents.js";
import { describeError, logout, whoAmI, type Identity } from "./api.js";
import { ApprovalsView } from "./approvals.js";
import { ChatView } from "./chat.js";
import { approvalsOf, useDashboard, type Dashboard } from "./dashboard.js";
import { LoginView, takeTicketFromUrl } from "./login.js";
import { MissionsView } from "./missions.js";
import { TaskView } from "./task.js";
import { useTheme } from "./theme.js";
import { WebhooksView } from "./webhooks.js";
import { NamesContext } from "./view-spec.js";

const BASE = "/ui";
const TABS = [
  { id: "console", path: `${BASE}/`, label: "Console" },
  { id: "missions", path: `${BASE}/missions`, label: "Missions" },
  { id: "agents", path: `${BASE}/agents`, label: "Agents" },
  { id: "approvals", path: `${BASE}/approvals`, label: "Approvals" },
  { id: "webhooks", path: `${BASE}/webhooks`, label: "Webhooks" },
] as const;
type TabId = (typeof TABS)[number]["id"];

function tabOf(path: string): TabId {
  const seg = path.replace(/\/+$/, "").split("/")[2] ?? "";
  if (seg === "tasks") return "missions"; // a task page lives under Missions
  return (TABS.find((t) => t.id === seg)?.id ?? "console") as TabId;
}

/** The task id of a task page (/ui/tasks/<id>), else undefined. */
function taskOf(path: string): string | undefined {
  const seg = path.replace(/\/+$/, "").split("/").slice(2);
  return seg.length === 2 && seg[0] === "tasks" && /^[\w-]{1,64}$/.test(seg[1]) ? seg[1] : undefined;
}

/** Whether the console has a page at this path (/ui, a tab, the login page); else "not found". */
function knownPath(path: string): boolean {
  const seg = path.replace(/\/+$/, "").split("/").slice(2);
  if (seg.length === 0 || taskOf(path)) return true;
  return seg.length === 1 && (seg[0] === "login" || TABS.some((t) => t.id === seg[0]));
}

function usePath(): [string, (to: string) => void] {
  const [path, setPath] = useState(window.location.pathname);
  useEffect(() => {
    const onPop = () => setPath(window.location.pathname);
    window.addEventListener("popstate", onPop);
    return () => window.removeEventListener("popstate", onPop);
  }, []);
  const navigate = useCallback((to: string) => {
    if (to !== window.location.pathname) window.history.pushState(null, "", to);
    setPath(to);
  }, []);
  return [path, navigate];
}

// read once at load, before anything renders, and removed from the address bar at once
const initialTicket = window.location.pathname.startsWith(`${BASE}/login`) ? takeTicketFromUrl() : undefined;

export function App() {
  const [path, navigate] = usePath();
  const ticket = initialTicket;
  const [identity, setIdentity] = useState<Identity | null | undefined>(ticket ? null : undefined);
  const [notice, setNotice] = useState<string>();

  useEffect(() => {
    if (ticket) return;
    whoAmI()
      .then(setIdentity)
      .catch((err) => {
        setNotice(`Could not reach the tower: ${describeError(err)}`);
        setIdentity(null);
      });
  }, []); // ticket is the page's initial one: asked once

  const onLogin = useCallback(
    (id: Identity) => {
      setNotice(undefined);
      setIdentity(id);
      if (window.location.pathname.startsWith(`${BASE}/login`)) navigate(`${BASE}/`);
    },
    [navigate],
  );
  const onUnauthenticated = useCallback(() => {
    setNotice("Your session ended; sign in again.");
    setIdentity(null);
  }, []);

  if (identity === undefined) {
    return (
      <main className="login" id="main">
        <p className="muted" aria-live="polite">
          Loading…
        </p>
      </main>
    );
  }
  if (identity === null) return <LoginView onLogin={onLogin} ticket={ticket} notice={notice} />;
  return (
    <Shell
      identity={identity}
      path={path}
      navigate={navigate}
      onLoggedOut={() => setIdentity(null)}
      onUnauthenticated={onUnauthenticated}
    />
  );
}

interface ShellProps {
  identity: Identity;
  path: string;
  navigate(to: string): void;
  onLoggedOut(): void;
  onUnauthenticated(): void;
}

function Shell({ identity, path, navigate, onLoggedOut, onUnauthenticated }: ShellProps) {
  const dashboard = useDashboard(onUnauthenticated);
  // ids in view_specs read as names: what the console has loaded
  const nameOf = useNames(dashboard);
  const [theme, toggleTheme] = useTheme();
  const [sessionId, setSessionId] = useState<string>();
  const composerRef = useRef<HTMLTextAreaElement>(null);
  const tab = tabOf(path);
  const pendingCount = approvalsOf(dashboard.data.sessions).counts.pending + dashboard.data.permissions.length;
  const canOperate = identity.role === "admin" || identity.role === "operator";

  useEffect(() => {
    if (path.startsWith(`${BASE}/login`)) navigate(`${BASE}/`);
  }, [path, navigate]);

  // "/" jumps to the composer from anywhere that is not a text field
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== "/" || e.ctrlKey || e.metaKey || e.altKey) return;
      const el = e.target as HTMLElement | null;
      if (el && (el.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName))) return;
      e.preventDefault();
      if (tabOf(window.location.pathname) !== "console") navigate(`${BASE}/`);
      window.setTimeout(() => composerRef.current?.focus(), 0);
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [navigate]);

  const doLogout = async () => {
    await logout().catch(() => undefined);
    onLoggedOut();
    navigate(`${BASE}/login`);
  };

  return (
    <div className="shell">
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <span className="brand">EP</span>
        <nav className="tabs" aria-label="Views">
          {TABS.map((t) => (
            <a
              key={t.id}
              href={t.path}
              className={t.id === tab ? "tab current" : "tab"}
              aria-current={t.id === tab ? "page" : undefined}
              onClick={(e) => {
                if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey) return;
                e.preventDefault();
                navigate(t.path);
              }}
            >
              {t.label}
              {t.id === "approvals" && pendingCount > 0 && (
                // biome-ignore lint/a11y/useAriaPropsSupportedByRole: console a11y follow-up (issue 36)
                <span className="count" aria-label={`${pendingCount} pending`}>
                  {pendingCount}
                </span>
              )}
            </a>
          ))}
        </nav>
        <div className="topbar-right">
          <span
            className="who muted small"
            title={`${identity.name ? `${identity.name}, ` : ""}${identity.subject} (${identity.role})`}
          >
            {identity.name ?? identity.subject} · {identity.role}
          </span>
          <button type="button" className="btn btn-small" onClick={() => void doLogout()}>
            Log out
          </button>
          <button
            type="button"
            className="btn btn-small theme-toggle"
            onClick={toggleTheme}
            aria-label={theme === "dark" ? "Switch to light theme" : "Switch to dark theme"}
            title={theme === "dark" ? "Switch to light theme" : "Switch to dark theme"}
          >
            <span aria-hidden="true">{theme === "dark" ? "☀" : "☾"}</span>
            <span className="toggle-label">{theme === "dark" ? "Light" : "Dark"}</span>
          </button>
        </div>
      </header>
      <StreamBanner dashboard={dashboard} />
      <NamesContext.Provider value={nameOf}>
        <main id="main" className={`main main-${tab}`} tabIndex={-1}>
          {!knownPath(path) && <NotFound path={path} navigate={navigate} />}
          {knownPath(path) && tab === "console" && (
            <ChatView
              dashboard={dashboard}
              sessionId={sessionId}
              selectSession={setSessionId}
              onUnauthenticated={onUnauthenticated}
              composerRef={composerRef}
            />
          )}
          {taskOf(path) && (
            <TaskView
              key={taskOf(path)}
              taskId={taskOf(path)!}
              dashboard={dashboard}
              canOperate={canOperate}
              canAdmin={identity.role === "admin"}
              navigate={navigate}
            />
          )}
          {knownPath(path) && !taskOf(path) && tab === "missions" && (
            <MissionsView dashboard={dashboard} navigate={navigate} canOperate={canOperate} />
          )}
          {knownPath(path) && tab === "agents" && (
            <AgentsView dashboard={dashboard} canOperate={canOperate} navigate={navigate} />
          )}
          {knownPath(path) && tab === "approvals" && <ApprovalsView dashboard={dashboard} />}
          {knownPath(path) && tab === "webhooks" && <WebhooksView dashboard={dashboard} canOperate={canOperate} />}
        </main>
      </NamesContext.Provider>
    </div>
  );
}

/** Ids read as names: domains, missions, tasks, agents and nodes the console has loaded. */
function useNames(dashboard: Dashboard): (id: string) => string | undefined {
  const { domains, missions, tasks, agents, nodes } = dashboard.data;
  return useMemo(() => {
    const m = new Map<string, string>();
    for (const d of domains) m.set(d.id, d.name);
    for (const x of missions) m.set(x.id, x.title);
    for (const t of tasks) m.set(t.id, t.title);
    for (const a of agents) if (a.name) m.set(a.id, a.name);
    for (const n of nodes) m.set(n.id, n.hostname);
    return (id: string) => m.get(id) || undefined;
  }, [domains, missions, tasks, agents, nodes]);
}

function NotFound({ path, navigate }: { path: string; navigate(to: string): void }) {
  return (
    <section className="not-found" aria-labelledby="not-found-title">
      <h1 id="not-found-title">Page not found</h1>
      <p className="muted">
        The console has no page at <code>{path}</code>.
      </p>
      <p>
        <a
          href={`${BASE}/`}
          onClick={(e) => {
            e.preventDefault();
            navigate(`${BASE}/`);
          }}
        >
          Back to the console
        </a>
      </p>
    </section>
  );
}

function StreamBanner({ dashboard }: { dashboard: Dashboard }) {
  const { stream } = dashboard;
  if (stream.status !== "down") return null;
  const secs = Math.round((stream.retryInMs ?? 0) / 1000);
  return (
    <div className="banner" role="status" id="stream-banner">
      Live updates are disconnected — reconnecting{secs > 0 ? ` (next try in ${secs} s)` : ""}. What you see may be out
      of date.
    </div>
  );
}
