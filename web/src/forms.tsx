// Create in place: a domain, a mission, a task. Each form sends what the API takes and shows the
// API's own validation message on the field it names (the `field` of an invalid_argument error,
// carried in the error's ep.errors.v1.ErrorDetail), so the console never re-implements the rules.
import { ClaimPolicySchema, RuntimeSchema, type ClaimPolicy, type Runtime } from "@gen/ep/tower/v1/resources_pb.js";
import { enumOf } from "@common/vocab.js";
import { ConnectError } from "@connectrpc/connect";
import { useId, useState, type FormEvent, type ReactNode } from "react";
import { ErrorDetailSchema } from "@gen/ep/errors/v1/errors_pb.js";
import type { Agent, Domain } from "@gen/ep/tower/v1/resources_pb.js";
import { api, describeError } from "./api.js";
import { RUNTIME_LABELS, runtimeLabel } from "./ui.js";
import { runtimeWord } from "./words.js";

type FieldErrors = Record<string, string>;

/** The API field an error names, and its message without the "field: " prefix. */
export function fieldOf(err: unknown): { field?: string; message: string } {
  const message = describeError(err);
  if (!(err instanceof ConnectError)) return { message };
  const [detail] = err.findDetails(ErrorDetailSchema);
  const field = detail?.details?.field;
  if (typeof field === "string" && field) {
    const prefix = `${field}: `;
    return { field, message: message.startsWith(prefix) ? message.slice(prefix.length) : message };
  }
  return { message };
}

export function useSubmit(fields: readonly string[]) {
  const [errors, setErrors] = useState<FieldErrors>({});
  const [formError, setFormError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const run = async (call: () => Promise<void>) => {
    setBusy(true);
    setErrors({});
    setFormError(undefined);
    try {
      await call();
    } catch (err) {
      const { field, message } = fieldOf(err);
      // an error about a field this form shows goes on it; anything else (input.x, a conflict) on the form
      const shown = field && fields.find((f) => field === f || field.startsWith(`${f}.`));
      if (shown) setErrors({ [shown]: field === shown ? message : `${field}: ${message}` });
      else setFormError(message);
    } finally {
      setBusy(false);
    }
  };
  return { errors, formError, busy, run };
}

export function Field({
  label,
  name,
  errors,
  children,
  hint,
}: {
  label: string;
  name: string;
  errors: FieldErrors;
  children: (id: string, describedBy: string | undefined) => ReactNode;
  hint?: string;
}) {
  const id = useId();
  const err = errors[name];
  const describedBy = err ? `${id}-error` : hint ? `${id}-hint` : undefined;
  return (
    <div className={err ? "form-field has-error" : "form-field"} data-field={name}>
      <label htmlFor={id}>{label}</label>
      {children(id, describedBy)}
      {hint && !err && (
        <span className="muted small" id={`${id}-hint`}>
          {hint}
        </span>
      )}
      {err && (
        <span className="field-error" id={`${id}-error`} role="alert">
          {err}
        </span>
      )}
    </div>
  );
}

export type FieldErrorMap = FieldErrors;

export function FormShell({
  title,
  onCancel,
  busy,
  formError,
  submitLabel,
  onSubmit,
  children,
}: {
  title: string;
  onCancel(): void;
  busy: boolean;
  formError?: string;
  submitLabel: string;
  onSubmit(e: FormEvent): void;
  children: ReactNode;
}) {
  return (
    <form className="create-form card" aria-label={title} onSubmit={onSubmit} noValidate>
      <h3>{title}</h3>
      {children}
      {formError && (
        <p className="error-note" role="alert">
          {formError}
        </p>
      )}
      <div className="button-row">
        <button type="submit" className="btn btn-primary" disabled={busy}>
          {busy ? "Creating…" : submitLabel}
        </button>
        <button type="button" className="btn" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

export function NewDomainForm({ onDone, onCancel }: { onDone(domain: Domain): void; onCancel(): void }) {
  const [name, setName] = useState("");
  const { errors, formError, busy, run } = useSubmit(["name"]);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => onDone((await api.work.createDomain({ name })).domain!));
  };
  return (
    <FormShell
      title="New domain"
      onCancel={onCancel}
      busy={busy}
      formError={formError}
      submitLabel="Create domain"
      onSubmit={submit}
    >
      <Field label="Name" name="name" errors={errors} hint="e.g. payments; agents and nodes serve domains">
        {(id, d) => (
          <input
            id={id}
            aria-describedby={d}
            aria-invalid={!!errors.name}
            value={name}
            onChange={(e) => setName(e.target.value)}
            autoFocus
          />
        )}
      </Field>
    </FormShell>
  );
}

export function NewMissionForm({ domains, onDone, onCancel }: { domains: Domain[]; onDone(): void; onCancel(): void }) {
  const [domainId, setDomainId] = useState(domains[0]?.id ?? "");
  const [title, setTitle] = useState("");
  const [description, setDescription] = useState("");
  const { errors, formError, busy, run } = useSubmit(["domain_id", "title", "description"]);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      await api.work.createMission({ domainId, title, description });
      onDone();
    });
  };
  return (
    <FormShell
      title="New mission"
      onCancel={onCancel}
      busy={busy}
      formError={formError}
      submitLabel="Create mission"
      onSubmit={submit}
    >
      <Field label="Domain" name="domain_id" errors={errors}>
        {(id, d) => (
          <select id={id} aria-describedby={d} value={domainId} onChange={(e) => setDomainId(e.target.value)}>
            {domains.length === 0 && <option value="">no domains yet</option>}
            {domains.map((dm) => (
              <option key={dm.id} value={dm.id}>
                {dm.name}
              </option>
            ))}
          </select>
        )}
      </Field>
      <Field label="Title" name="title" errors={errors}>
        {(id, d) => (
          <input
            id={id}
            aria-describedby={d}
            aria-invalid={!!errors.title}
            value={title}
            onChange={(e) => setTitle(e.target.value)}
            autoFocus
          />
        )}
      </Field>
      <Field label="Description" name="description" errors={errors}>
        {(id, d) => (
          <textarea
            id={id}
            aria-describedby={d}
            rows={2}
            value={description}
            onChange={(e) => setDescription(e.target.value)}
          />
        )}
      </Field>
    </FormShell>
  );
}

const POLICIES = [
  { value: "first_claim", label: "First agent to claim" },
  { value: "assigned", label: "One agent (assignee)" },
  { value: "broadcast", label: "Every matching agent" },
];

export function NewTaskForm({
  missionId,
  agents,
  onDone,
  onCancel,
}: {
  missionId: string;
  agents: Agent[];
  onDone(taskId: string): void;
  onCancel(): void;
}) {
  const [title, setTitle] = useState("");
  const [runtime, setRuntime] = useState("");
  const [prompt, setPrompt] = useState("");
  const [command, setCommand] = useState("");
  const [claimPolicy, setClaimPolicy] = useState("first_claim");
  const [priority, setPriority] = useState("0");
  const [capabilities, setCapabilities] = useState("");
  const [assignee, setAssignee] = useState("");
  const { errors, formError, busy, run } = useSubmit([
    "title",
    "runtime",
    "input",
    "claim_policy",
    "priority",
    "capabilities",
    "assignee_agent_id",
  ]);
  const shell = runtime === "shell";
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const input: Record<string, string> | undefined = shell
        ? command
          ? { command }
          : undefined
        : prompt
          ? { prompt }
          : undefined;
      const res = await api.work.createTask({
        missionId,
        title,
        runtime: enumOf<Runtime>(RuntimeSchema, runtime, "runtime"),
        input,
        claimPolicy: enumOf<ClaimPolicy>(ClaimPolicySchema, claimPolicy, "claim_policy"),
        priority: Number.parseInt(priority || "0", 10) || 0,
        capabilities: capabilities
          .split(",")
          .map((c) => c.trim())
          .filter(Boolean),
        assigneeAgentId: claimPolicy === "assigned" ? assignee : "",
      });
      onDone(res.task!.id);
    });
  };
  return (
    <FormShell
      title="New task"
      onCancel={onCancel}
      busy={busy}
      formError={formError}
      submitLabel="Submit task"
      onSubmit={submit}
    >
      <Field label="Title" name="title" errors={errors}>
        {(id, d) => (
          <input
            id={id}
            aria-describedby={d}
            aria-invalid={!!errors.title}
            value={title}
            onChange={(e) => setTitle(e.target.value)}
            autoFocus
          />
        )}
      </Field>
      <Field label="Runtime" name="runtime" errors={errors}>
        {(id, d) => (
          <select id={id} aria-describedby={d} value={runtime} onChange={(e) => setRuntime(e.target.value)}>
            <option value="">Any agent's runtime</option>
            {Object.entries(RUNTIME_LABELS).map(([kind, label]) => (
              <option key={kind} value={kind}>
                {label}
              </option>
            ))}
          </select>
        )}
      </Field>
      {shell ? (
        <Field label="Command" name="input" errors={errors} hint="run with bash -c on the agent's node">
          {(id, d) => (
            <input
              id={id}
              className="mono"
              aria-describedby={d}
              aria-invalid={!!errors.input}
              value={command}
              onChange={(e) => setCommand(e.target.value)}
            />
          )}
        </Field>
      ) : (
        <Field label="Prompt" name="input" errors={errors} hint="what the agent is asked to do; empty uses the title">
          {(id, d) => (
            <textarea
              id={id}
              aria-describedby={d}
              rows={3}
              value={prompt}
              onChange={(e) => setPrompt(e.target.value)}
            />
          )}
        </Field>
      )}
      <div className="form-row">
        <Field label="Who runs it" name="claim_policy" errors={errors}>
          {(id, d) => (
            <select id={id} aria-describedby={d} value={claimPolicy} onChange={(e) => setClaimPolicy(e.target.value)}>
              {POLICIES.map((p) => (
                <option key={p.value} value={p.value}>
                  {p.label}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Priority" name="priority" errors={errors}>
          {(id, d) => (
            <input
              id={id}
              type="number"
              aria-describedby={d}
              value={priority}
              onChange={(e) => setPriority(e.target.value)}
            />
          )}
        </Field>
      </div>
      {claimPolicy === "assigned" && (
        <Field label="Assignee" name="assignee_agent_id" errors={errors}>
          {(id, d) => (
            <select
              id={id}
              aria-describedby={d}
              aria-invalid={!!errors.assignee_agent_id}
              value={assignee}
              onChange={(e) => setAssignee(e.target.value)}
            >
              <option value="">choose an agent</option>
              {agents.map((a) => (
                <option key={a.id} value={a.id}>
                  {a.name || a.id} · {runtimeLabel(runtimeWord(a.runtime))}
                </option>
              ))}
            </select>
          )}
        </Field>
      )}
      <Field
        label="Capabilities"
        name="capabilities"
        errors={errors}
        hint="comma-separated; only agents with all of them claim it"
      >
        {(id, d) => (
          <input id={id} aria-describedby={d} value={capabilities} onChange={(e) => setCapabilities(e.target.value)} />
        )}
      </Field>
    </FormShell>
  );
}
