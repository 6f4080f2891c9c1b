// Login: the company's identity provider (when the tower has one: a plain link to
// /auth/oidc/start, the tower does the rest), the one-time URL the tower prints
// (`/ui/login#ticket=…`) or an API token. The last two are exchanged at POST /auth/session for an
// HttpOnly SameSite=Strict cookie; the page keeps neither.
import { useEffect, useRef, useState, type FormEvent } from "react";
import { describeError, loginWithTicket, loginWithToken, oidcProvider, type Identity } from "./api.js";
import { useTheme } from "./theme.js";
import { ErrorNote } from "./ui.js";

/** Reads and removes `#ticket=…` so the one-time secret leaves the address bar and history. */
export function takeTicketFromUrl(): string | undefined {
  const m = /(?:^#|&)ticket=([^&]+)/.exec(window.location.hash);
  if (!m) return undefined;
  window.history.replaceState(null, "", window.location.pathname + window.location.search);
  return decodeURIComponent(m[1]);
}

export function LoginView({
  onLogin,
  ticket,
  notice,
}: {
  onLogin(id: Identity): void;
  ticket?: string;
  notice?: string;
}) {
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(ticket !== undefined);
  const [token, setToken] = useState("");
  const redeemed = useRef(false);
  const [theme, toggleTheme] = useTheme();
  const [provider, setProvider] = useState<{ name: string; startUrl: string }>();

  useEffect(() => {
    // without it the page still offers the link and the token: nothing to report
    oidcProvider().then(setProvider, () => setProvider(undefined));
  }, []);

  useEffect(() => {
    if (!ticket || redeemed.current) return;
    redeemed.current = true;
    loginWithTicket(ticket)
      .then((id) => id && onLogin(id))
      .catch((err) =>
        setError(
          `The login link did not work (${describeError(err)}). It is valid ` +
            `once, for 24 hours; run 'ep ui' for a new one or use a token.`,
        ),
      )
      .finally(() => setBusy(false));
  }, [ticket, onLogin]);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (!token.trim()) return;
    setBusy(true);
    setError(undefined);
    try {
      const id = await loginWithToken(token.trim());
      setToken("");
      if (id) onLogin(id);
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <main className="login" id="main">
      <button
        type="button"
        className="btn btn-small theme-toggle login-theme"
        onClick={toggleTheme}
        aria-label={theme === "dark" ? "Switch to light theme" : "Switch to dark theme"}
      >
        <span aria-hidden="true">{theme === "dark" ? "☀" : "☾"}</span>
        <span className="toggle-label">{theme === "dark" ? "Light" : "Dark"}</span>
      </button>
      <div className="login-box">
        <h1>EP console</h1>
        {busy && ticket ? (
          <p aria-live="polite">Signing in…</p>
        ) : (
          <p className="muted">
            Open the login link <code>ep up</code> printed (run <code>ep ui</code> for a fresh one), or sign in with an
            API token: the admin token is in <code>~/.ep/tower/admin.token</code> on the tower's machine.
          </p>
        )}
        {notice && <p className="muted">{notice}</p>}
        <ErrorNote error={error} />
        {provider && (
          <>
            <a className="btn btn-primary login-sso" href={provider.startUrl}>
              Sign in with {provider.name}
            </a>
            <p className="login-or muted small" aria-hidden="true">
              or
            </p>
          </>
        )}
        <form onSubmit={submit} className="login-form">
          <label htmlFor="token-input">API token</label>
          <input
            id="token-input"
            type="password"
            autoComplete="off"
            spellCheck={false}
            value={token}
            onChange={(e) => setToken(e.target.value)}
            placeholder="ept_…"
            autoFocus={!ticket}
          />
          <button type="submit" className={provider ? "btn" : "btn btn-primary"} disabled={busy || !token.trim()}>
            Sign in
          </button>
        </form>
        <p className="muted small">
          The session is kept in an HttpOnly cookie for at most 7 days and ends with the token it came from; the token
          is not stored by this page.
          {provider && ` Signed in with ${provider.name}, it ends when your sign-in there does.`}
        </p>
      </div>
    </main>
  );
}
