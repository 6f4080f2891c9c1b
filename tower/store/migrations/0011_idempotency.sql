-- Idempotency keys of creates (Idempotency-Key header, request_id field): one row per key a
-- caller used on a create method, written in the same transaction as the create, so a create
-- never lands without its key nor a key without its create. scope = the method and the caller's
-- principal; request_hash = SHA-256 of the request without its key (a reuse with another request
-- is refused); response = the first answer (JSON; a token's, sealed under the secret-store key).
-- Rows live 24 h (expires_ms), then the tower sweeps them.
CREATE TABLE idempotency_keys (
  scope TEXT NOT NULL,
  key TEXT NOT NULL,
  request_hash TEXT NOT NULL,
  response TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  expires_ms BIGINT NOT NULL,
  PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_ms);
