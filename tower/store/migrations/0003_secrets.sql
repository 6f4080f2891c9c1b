-- The secret store. A value is never stored in the clear: `ciphertext` is AES-256-GCM
-- under the key named by `key_id` (tower/domain/secrets/crypto.ts), with its own random
-- `iv` and authentication `tag` (all base64). `version` counts value changes; re-encryption
-- under a new key keeps it. A grant gives one secret to one agent or to every agent of
-- one domain (exactly one of agent_id / domain_id is set).

CREATE TABLE secrets (
  name TEXT PRIMARY KEY,
  domain_id TEXT NOT NULL DEFAULT '',
  ciphertext TEXT NOT NULL,
  iv TEXT NOT NULL,
  tag TEXT NOT NULL,
  key_id TEXT NOT NULL,
  version INTEGER NOT NULL DEFAULT 1,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX secrets_key_id ON secrets (key_id);

CREATE TABLE secret_grants (
  secret_name TEXT NOT NULL REFERENCES secrets(name) ON DELETE CASCADE,
  agent_id TEXT NOT NULL DEFAULT '',
  domain_id TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL,
  PRIMARY KEY (secret_name, agent_id, domain_id),
  CHECK ((agent_id = '') <> (domain_id = ''))
);
CREATE INDEX secret_grants_agent ON secret_grants (agent_id);
CREATE INDEX secret_grants_domain ON secret_grants (domain_id);
