// SecretService: the tower's encrypted secret store. Admins set, list (names and metadata,
// never values), delete, grant and revoke; a node resolves a value only for an agent that runs
// on that node and only when the secret is granted to that agent or to its domain. Values are
// encrypted at rest (secrets/crypto.ts) and never appear in events, logs or error messages.
import { create } from "@bufbuild/protobuf";
import { iso } from "../../../common/clock.js";
import { EpError, invalidField } from "../../../common/errors.js";
import * as pb from "../../../gen/ep/tower/v1/secrets_pb.js";
import type { SecretGrantRow, SecretRow } from "../../store/secret-store.js";
import type { AgentRow, Store } from "../../store/store.js";
import type { Logger } from "../../../common/log.js";
import { authorize, type Caller } from "../caller.js";
import type { Deps } from "../deps.js";
import { commit } from "../event-hub.js";
import { decryptSecret, encryptSecret, loadKeyring, secretKeyFile, type SecretKeyring } from "./crypto.js";
import { paginate } from "../paging.js";
import { timestampOf } from "../../../common/vocab.js";

/** A secret name: a letter or underscore, then letters, digits, `_`, `.`, `-`; at most 128. */
export const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,127}$/;
/** Largest value accepted, in UTF-8 bytes. */
export const MAX_SECRET_BYTES = 64 * 1024;

/**
 * Where the keyring comes from; asked on every use until a key shows up (bootstrap writes the key file after the tower
 * is assembled).
 */
export interface KeySource {
  keyring(): SecretKeyring | undefined;
  /** how to configure a key, for the "no key" error */
  hint: string;
}

/** EP_SECRET_KEY / EP_SECRET_KEY_PREVIOUS / the key file under the tower's home; cached once found. */
export function envKeySource(towerHome: string, env: NodeJS.ProcessEnv = process.env): KeySource {
  let ring: SecretKeyring | undefined;
  return {
    keyring: () => (ring ??= loadKeyring(towerHome, env)),
    hint:
      `set EP_SECRET_KEY or create the key file ` +
      `${secretKeyFile(towerHome, env)} (ep-tower writes it at first start)`,
  };
}

export interface ReencryptReport {
  /** rows now under the current key */
  reencrypted: number;
  /** rows under a key this tower does not have (left as they are) */
  unreadable: string[];
}

export interface SecretServiceImpl {
  setSecret(caller: Caller, req: pb.SetSecretRequest): Promise<pb.SetSecretResponse>;
  listSecrets(caller: Caller, req: pb.ListSecretsRequest): Promise<pb.ListSecretsResponse>;
  deleteSecret(caller: Caller, req: pb.DeleteSecretRequest): Promise<pb.DeleteSecretResponse>;
  grantSecret(caller: Caller, req: pb.GrantSecretRequest): Promise<pb.GrantSecretResponse>;
  revokeSecret(caller: Caller, req: pb.RevokeSecretRequest): Promise<pb.RevokeSecretResponse>;
  resolveSecret(caller: Caller, req: pb.ResolveSecretRequest): Promise<pb.ResolveSecretResponse>;
  /** Re-encrypts every value stored under an older key (EP_SECRET_KEY_PREVIOUS) with the current key; run at start. */
  reencrypt(): Promise<ReencryptReport>;
}

function secretMsg(row: SecretRow, grants: SecretGrantRow[]): pb.Secret {
  return create(pb.SecretSchema, {
    name: row.name,
    domainId: row.domainId,
    grantedAgents: grants.filter((g) => g.agentId).map((g) => g.agentId),
    grantedDomains: grants.filter((g) => g.domainId).map((g) => g.domainId),
    version: row.version,
    createdAt: timestampOf(row.createdAt),
    updatedAt: timestampOf(row.updatedAt),
  });
}

function checkName(name: string): void {
  if (name === "") throw invalidField("name", "is required");
  if (!SECRET_NAME.test(name))
    throw invalidField("name", "must start with a letter or _ and hold only letters, digits, _, . and - (at most 128)");
}

export function createSecretService(deps: Deps, keys: KeySource): SecretServiceImpl {
  const { store, clock, log } = deps;

  const keyring = (action: string): SecretKeyring => {
    const ring = keys.keyring();
    if (!ring)
      throw new EpError("config_invalid", `no secret-store key, refusing to ${action}: ${keys.hint}`, {
        setting: "EP_SECRET_KEY",
      });
    return ring;
  };

  const mustSecret = async (name: string): Promise<SecretRow> => {
    checkName(name);
    const row = await store.getSecret(name);
    if (!row) throw new EpError("secret_not_found", `no secret named ${name}; list them with 'ep secret ls'`, { name });
    return row;
  };

  const granted = (grants: SecretGrantRow[], agent: AgentRow) =>
    grants.some((g) => (g.agentId && g.agentId === agent.id) || (g.domainId && g.domainId === agent.domainId));

  return {
    async setSecret(caller, req) {
      authorize(caller, "admin");
      checkName(req.name);
      if (typeof req.value !== "string" || req.value === "")
        throw invalidField("value", "is required (read it from stdin or a prompt, never from an argument)");
      if (Buffer.byteLength(req.value, "utf8") > MAX_SECRET_BYTES)
        throw invalidField("value", `is larger than ${MAX_SECRET_BYTES} bytes`);
      if (req.domainId && !(await store.getDomain(req.domainId)))
        throw new EpError("domain_not_found", `no domain ${req.domainId}`, { domain_id: req.domainId });
      const ring = keyring("store secrets");
      const now = iso(clock.now());
      return commit(deps, async (tx, emit) => {
        const existing = await tx.getSecret(req.name);
        if (existing && req.domainId && existing.domainId !== req.domainId) {
          throw new EpError(
            "conflict",
            `secret ${req.name} exists in ` +
              `${existing.domainId ? `domain ${existing.domainId}` : "no domain"}; delete it first to move it`,
            { field: "domain_id" },
          );
        }
        const cipher = encryptSecret(ring.current, req.name, req.value);
        const row = await tx.putSecret({
          name: req.name,
          domainId: existing?.domainId ?? req.domainId,
          ...cipher,
          version: 1,
          createdAt: now,
          updatedAt: now,
        });
        emit({
          type: "matrix",
          name: existing ? "secret.updated" : "secret.created",
          domainId: row.domainId || undefined,
          payload: { name: row.name, version: row.version },
        });
        return create(pb.SetSecretResponseSchema, { secret: secretMsg(row, await tx.listSecretGrants(row.name)) });
      });
    },

    async listSecrets(caller, req) {
      authorize(caller, "admin");
      const [rows, grants] = await Promise.all([store.listSecrets(), store.listSecretGrants()]);
      const { page, nextPageToken } = paginate(rows, (r) => r.name, req);
      return create(pb.ListSecretsResponseSchema, {
        secrets: page.map((r) =>
          secretMsg(
            r,
            grants.filter((g) => g.secretName === r.name),
          ),
        ),
        nextPageToken,
      });
    },

    async deleteSecret(caller, req) {
      authorize(caller, "admin");
      const row = await mustSecret(req.name);
      await commit(deps, async (tx, emit) => {
        if (!(await tx.deleteSecret(row.name)))
          throw new EpError("secret_not_found", `no secret named ${row.name}`, { name: row.name });
        emit({
          type: "matrix",
          name: "secret.deleted",
          domainId: row.domainId || undefined,
          payload: { name: row.name },
        });
      });
      return create(pb.DeleteSecretResponseSchema, {});
    },

    async grantSecret(caller, req) {
      authorize(caller, "admin");
      const row = await mustSecret(req.name);
      const t = await grantTarget(store, row, req);
      return commit(deps, async (tx, emit) => {
        await tx.insertSecretGrant({ secretName: row.name, ...t, createdAt: iso(clock.now()) });
        emit({
          type: "matrix",
          name: "secret.granted",
          domainId: row.domainId || undefined,
          agentId: t.agentId || undefined,
          payload: { name: row.name, agent_id: t.agentId, domain_id: t.domainId },
        });
        return create(pb.GrantSecretResponseSchema, { secret: secretMsg(row, await tx.listSecretGrants(row.name)) });
      });
    },

    async revokeSecret(caller, req) {
      authorize(caller, "admin");
      const row = await mustSecret(req.name);
      if (Boolean(req.agentId) === Boolean(req.domainId))
        throw invalidField(req.agentId ? "domain_id" : "agent_id", "give exactly one of agent_id or domain_id");
      const t = { agentId: req.agentId, domainId: req.domainId };
      return commit(deps, async (tx, emit) => {
        if (!(await tx.deleteSecretGrant(row.name, t))) {
          throw new EpError(
            "not_found",
            `secret ${row.name} is not granted to ${t.agentId ? `agent ${t.agentId}` : `domain ${t.domainId}`}`,
            { name: row.name },
          );
        }
        emit({
          type: "matrix",
          name: "secret.revoked",
          domainId: row.domainId || undefined,
          agentId: t.agentId || undefined,
          payload: { name: row.name, agent_id: t.agentId, domain_id: t.domainId },
        });
        return create(pb.RevokeSecretResponseSchema, { secret: secretMsg(row, await tx.listSecretGrants(row.name)) });
      });
    },

    async resolveSecret(caller, req) {
      authorize(caller, "node");
      if (!req.agentId) throw invalidField("agent_id", "is required");
      checkName(req.name);
      const agent = await store.getAgent(req.agentId);
      // the same answer for "no such agent" and "not on your node": a node learns nothing about others
      if (!agent || agent.nodeId !== caller.nodeId) {
        throw new EpError("forbidden", `agent ${req.agentId} does not run on this node`, { agent_id: req.agentId });
      }
      const audit = (status: "ok" | "denied", code?: string) =>
        commit(deps, async (_tx, emit) => {
          emit({
            type: "matrix",
            name: "secret.resolved",
            status,
            domainId: agent.domainId,
            agentId: agent.id,
            payload: { name: req.name, node_id: agent.nodeId, ...(code ? { code } : {}) },
          });
        }).catch((err: Error) => log.warn("secret audit event not written", { name: req.name, error: err.message }));
      const row = await store.getSecret(req.name);
      if (!row) {
        await audit("denied", "secret_not_found");
        throw new EpError("secret_not_found", `no secret named ${req.name}`, { name: req.name });
      }
      if (
        (row.domainId && row.domainId !== agent.domainId) ||
        !granted(await store.listSecretGrants(row.name), agent)
      ) {
        await audit("denied", "forbidden");
        throw new EpError(
          "forbidden",
          `secret ${req.name} is not granted to agent ${agent.id} or its domain ${agent.domainId}`,
          { name: req.name, agent_id: agent.id },
        );
      }
      const value = decryptSecret(keyring("read secrets"), row.name, row);
      await audit("ok");
      return create(pb.ResolveSecretResponseSchema, { value });
    },

    reencrypt: () => reencryptAll(store, keys, log),
  };
}

/** Checks a grant target: exactly one of agent / domain, existing, inside the secret's domain if it has one. */
async function grantTarget(
  store: Store,
  secret: SecretRow,
  req: { agentId: string; domainId: string },
): Promise<{ agentId: string; domainId: string }> {
  if (Boolean(req.agentId) === Boolean(req.domainId))
    throw invalidField(req.agentId ? "domain_id" : "agent_id", "give exactly one of agent_id or domain_id");
  if (req.agentId) {
    const agent = await store.getAgent(req.agentId);
    if (!agent) throw new EpError("agent_not_found", `no agent ${req.agentId}`, { agent_id: req.agentId });
    if (secret.domainId && agent.domainId !== secret.domainId) {
      throw new EpError(
        "conflict",
        `secret ${secret.name} belongs to domain ${secret.domainId}; agent ${agent.id} is in ${agent.domainId}`,
        { field: "agent_id" },
      );
    }
    return { agentId: agent.id, domainId: "" };
  }
  if (!(await store.getDomain(req.domainId)))
    throw new EpError("domain_not_found", `no domain ${req.domainId}`, { domain_id: req.domainId });
  if (secret.domainId && req.domainId !== secret.domainId) {
    throw new EpError(
      "conflict",
      `secret ${secret.name} belongs to domain ${secret.domainId}; it cannot be granted to domain ${req.domainId}`,
      { field: "domain_id" },
    );
  }
  return { agentId: "", domainId: req.domainId };
}

/** Re-encrypts every secret stored under an older key (EP_SECRET_KEY_PREVIOUS) under the current one. */
async function reencryptAll(store: Store, keys: KeySource, log: Logger): Promise<ReencryptReport> {
  const report: ReencryptReport = { reencrypted: 0, unreadable: [] };
  const rows = await store.listSecrets();
  if (!rows.length) return report;
  const ring = keys.keyring();
  if (!ring) {
    log.warn("secrets are stored but no secret-store key is configured; they cannot be read", {
      count: rows.length,
      hint: keys.hint,
    });
    report.unreadable = rows.map((r) => r.name);
    return report;
  }
  for (const row of rows) {
    if (row.keyId === ring.current.id) continue;
    if (!ring.find(row.keyId)) {
      report.unreadable.push(row.name);
      continue;
    }
    const value = decryptSecret(ring, row.name, row);
    if (
      await store.updateSecretCipher(
        row.name,
        { keyId: row.keyId, version: row.version },
        encryptSecret(ring.current, row.name, value),
      )
    )
      report.reencrypted++;
  }
  if (report.reencrypted)
    log.info("secrets re-encrypted under the current key", { count: report.reencrypted, key_id: ring.current.id });
  if (report.unreadable.length) {
    log.warn("secrets under a key this tower does not have; put the old key in EP_SECRET_KEY_PREVIOUS and restart", {
      names: report.unreadable,
    });
  }
  return report;
}
