// Webhooks tab: a domain's outgoing webhooks (docs/webhooks.md). Everyone who may read lists them
// and their delivery logs; admins and operators add (the signing secret is shown once, here),
// test and remove them. The API's own checks speak on the form's fields.
import { useCallback, useEffect, useState, type FormEvent } from "react";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import {
  WebhookDeliveryStatus,
  WebhookFormat,
  type Webhook,
  type WebhookDelivery,
} from "@gen/ep/tower/v1/webhooks_pb.js";
import { WEBHOOK_EVENTS } from "@common/webhook-events.js";
import { api, describeError } from "./api.js";
import type { Dashboard } from "./dashboard.js";
import { Field, FormShell, useSubmit } from "./forms.js";
import { Empty, ErrorNote, StatusBadge } from "./ui.js";

const STATUS_WORD: Record<number, string> = {
  [WebhookDeliveryStatus.PENDING]: "pending",
  [WebhookDeliveryStatus.SUCCEEDED]: "succeeded",
  [WebhookDeliveryStatus.FAILED]: "failed",
};
const when = (t: WebhookDelivery["createTime"]) =>
  t ? timestampDate(t).toISOString().replace("T", " ").slice(0, 19) : "";

export function WebhooksView({ dashboard, canOperate }: { dashboard: Dashboard; canOperate: boolean }) {
  const { domains } = dashboard.data;
  const [domainId, setDomainId] = useState("");
  const chosen = domainId || domains[0]?.id || "";
  const [hooks, setHooks] = useState<Webhook[]>();
  const [error, setError] = useState<string>();
  const [adding, setAdding] = useState(false);
  const [secret, setSecret] = useState<{ webhookId: string; secret: string }>();

  const load = useCallback(async () => {
    if (!chosen) return;
    try {
      setHooks((await api.webhooks.listWebhooks({ domainId: chosen })).webhooks);
      setError(undefined);
    } catch (err) {
      setError(describeError(err));
    }
  }, [chosen]);
  useEffect(() => {
    setHooks(undefined);
    void load();
  }, [load]);

  return (
    <section className="tab-panel" aria-labelledby="webhooks-heading">
      <div className="panel-head">
        <h2 id="webhooks-heading">Webhooks</h2>
        <label className="inline-field">
          Domain{" "}
          <select aria-label="Domain" value={chosen} onChange={(e) => setDomainId(e.target.value)}>
            {domains.length === 0 && <option value="">no domains yet</option>}
            {domains.map((d) => (
              <option key={d.id} value={d.id}>
                {d.name}
              </option>
            ))}
          </select>
        </label>
        {canOperate && chosen && !adding && (
          <button type="button" className="btn btn-primary" onClick={() => setAdding(true)}>
            Add webhook
          </button>
        )}
      </div>
      <p className="muted small">
        Each delivery is a signed POST (EP-Signature: HMAC-SHA256 of "timestamp.body"), retried with backoff until the
        receiver answers 2xx.
      </p>
      <ErrorNote error={error} />
      {secret && (
        <div className="card secret-once" role="status" aria-label="Signing secret">
          <p>
            <strong>Signing secret of {secret.webhookId}</strong>: copy it now, it is not shown again.
          </p>
          <code className="secret-value">{secret.secret}</code>
          <div className="button-row">
            <button type="button" className="btn" onClick={() => setSecret(undefined)}>
              I have copied it
            </button>
          </div>
        </div>
      )}
      {adding && (
        <NewWebhookForm
          domainId={chosen}
          onCancel={() => setAdding(false)}
          onDone={(webhookId, s) => {
            setAdding(false);
            setSecret({ webhookId, secret: s });
            void load();
          }}
        />
      )}
      {hooks && hooks.length === 0 && (
        <Empty>
          No webhooks in this domain.{canOperate ? " Add one to hear about failed tasks and approvals." : ""}
        </Empty>
      )}
      <div className="webhook-list">
        {hooks?.map((h) => (
          <WebhookCard key={h.id} hook={h} canOperate={canOperate} onRemoved={() => void load()} />
        ))}
      </div>
    </section>
  );
}

function NewWebhookForm({
  domainId,
  onDone,
  onCancel,
}: {
  domainId: string;
  onDone(webhookId: string, secret: string): void;
  onCancel(): void;
}) {
  const [url, setUrl] = useState("");
  const [events, setEvents] = useState<string[]>(["task.failed", "permission.requested"]);
  const [slack, setSlack] = useState(false);
  const [description, setDescription] = useState("");
  const { errors, formError, busy, run } = useSubmit(["url", "events", "format", "description"]);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const res = await api.webhooks.createWebhook({
        domainId,
        url,
        events,
        format: slack ? WebhookFormat.SLACK : WebhookFormat.EP,
        description,
      });
      onDone(res.webhook!.id, res.secret);
    });
  };
  const toggle = (name: string) =>
    setEvents((xs) => (xs.includes(name) ? xs.filter((x) => x !== name) : [...xs, name]));
  return (
    <FormShell
      title="New webhook"
      onCancel={onCancel}
      busy={busy}
      formError={formError}
      submitLabel="Add webhook"
      onSubmit={submit}
    >
      <Field label="URL" name="url" errors={errors} hint="http:// or https://; the tower POSTs each chosen event here">
        {(id, d) => (
          <input
            id={id}
            aria-describedby={d}
            aria-invalid={!!errors.url}
            value={url}
            onChange={(e) => setUrl(e.target.value)}
            placeholder="https://hooks.example.com/ep"
            autoFocus
          />
        )}
      </Field>
      <Field label="Events" name="events" errors={errors}>
        {(id, d) => (
          <fieldset id={id} aria-describedby={d} className="checkbox-group">
            {WEBHOOK_EVENTS.map((name) => (
              <label key={name} className="checkbox">
                <input type="checkbox" checked={events.includes(name)} onChange={() => toggle(name)} /> {name}
              </label>
            ))}
          </fieldset>
        )}
      </Field>
      <Field label="Slack" name="format" errors={errors}>
        {(id, d) => (
          <label className="checkbox">
            <input
              id={id}
              aria-describedby={d}
              type="checkbox"
              checked={slack}
              onChange={(e) => setSlack(e.target.checked)}
            />{" "}
            send a Slack message (text + blocks) instead of the event JSON
          </label>
        )}
      </Field>
      <Field label="Description" name="description" errors={errors}>
        {(id, d) => (
          <input
            id={id}
            aria-describedby={d}
            value={description}
            onChange={(e) => setDescription(e.target.value)}
            placeholder="what it is for"
          />
        )}
      </Field>
    </FormShell>
  );
}

function WebhookCard({ hook: h, canOperate, onRemoved }: { hook: Webhook; canOperate: boolean; onRemoved(): void }) {
  const [deliveries, setDeliveries] = useState<WebhookDelivery[]>();
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const loadLog = useCallback(async () => {
    try {
      setDeliveries(
        (await api.webhooks.listWebhookDeliveries({ domainId: h.domainId, webhookId: h.id, pageSize: 20 })).deliveries,
      );
    } catch (err) {
      setError(describeError(err));
    }
  }, [h.domainId, h.id]);
  useEffect(() => {
    void loadLog();
  }, [loadLog]);
  const act = async (what: "test" | "remove") => {
    if (what === "remove" && !window.confirm(`Remove the webhook to ${h.url} and its delivery log?`)) return;
    setBusy(true);
    setError(undefined);
    try {
      if (what === "test") {
        await api.webhooks.testWebhook({ domainId: h.domainId, webhookId: h.id });
        await loadLog();
      } else {
        await api.webhooks.deleteWebhook({ domainId: h.domainId, webhookId: h.id });
        onRemoved();
      }
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <article className="card webhook-card" aria-label={`Webhook ${h.url}`} data-webhook-id={h.id}>
      <header className="card-head">
        <span>
          <strong>{h.url}</strong> {h.format === WebhookFormat.SLACK && <span className="muted small">(Slack)</span>}
        </span>
        <span className="muted small">{h.id}</span>
      </header>
      <p className="small">
        {h.events.join(", ")}
        {h.description ? ` · ${h.description}` : ""}
        {h.createdBy ? <span className="muted"> · added by {h.createdBy}</span> : null}
      </p>
      <div className="button-row">
        <button type="button" className="btn" onClick={() => void loadLog()}>
          Refresh log
        </button>
        {canOperate && (
          <>
            <button type="button" className="btn" disabled={busy} onClick={() => void act("test")}>
              Send test
            </button>
            <button type="button" className="btn btn-reject" disabled={busy} onClick={() => void act("remove")}>
              Remove
            </button>
          </>
        )}
      </div>
      <ErrorNote error={error} />
      {deliveries && deliveries.length === 0 && <p className="muted small">No deliveries yet.</p>}
      {deliveries && deliveries.length > 0 && (
        <table className="deliveries" aria-label={`Deliveries of ${h.id}`}>
          <thead>
            <tr>
              <th>When</th>
              <th>Event</th>
              <th>Status</th>
              <th>Attempts</th>
              <th>Answer</th>
            </tr>
          </thead>
          <tbody>
            {deliveries.map((d) => (
              <tr key={d.id} data-delivery-id={d.id}>
                <td>{when(d.createTime)}</td>
                <td>{d.eventName}</td>
                <td>
                  <StatusBadge status={STATUS_WORD[d.status] ?? "unknown"} />
                </td>
                <td>{d.attempts}</td>
                <td>{d.error ? `${d.statusCode || ""} ${d.error}`.trim() : d.statusCode || ""}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </article>
  );
}
