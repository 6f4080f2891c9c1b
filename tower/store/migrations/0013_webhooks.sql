-- Outgoing webhooks per domain (docs/webhooks.md). The signing secret is kept only as
-- AES-256-GCM ciphertext under the secret-store key, like the secrets table. events is a JSON
-- array of event names; after_event_id is the newest event id when the webhook was made: it
-- receives later events only.
CREATE TABLE webhooks (
  id TEXT PRIMARY KEY,
  domain_id TEXT NOT NULL,
  url TEXT NOT NULL,
  events TEXT NOT NULL DEFAULT '[]',
  format TEXT NOT NULL DEFAULT 'ep',
  description TEXT NOT NULL DEFAULT '',
  ciphertext TEXT NOT NULL,
  iv TEXT NOT NULL,
  tag TEXT NOT NULL,
  key_id TEXT NOT NULL,
  created_by TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL,
  after_event_id BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX webhooks_domain ON webhooks (domain_id, id);

-- One row per (webhook, event): the body as it is signed and sent, where it stands (pending |
-- succeeded | failed), the attempts made (attempt_log: a JSON array, one entry per attempt, at
-- most the configured number of attempts) and the next one's time. A replica takes a due row by
-- setting lease_id / lease_until (FOR UPDATE SKIP LOCKED on PostgreSQL), so one replica sends it.
CREATE TABLE webhook_deliveries (
  id TEXT PRIMARY KEY,
  webhook_id TEXT NOT NULL,
  domain_id TEXT NOT NULL,
  event_id BIGINT NOT NULL DEFAULT 0,
  event_name TEXT NOT NULL,
  body TEXT NOT NULL,
  status TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  status_code INTEGER NOT NULL DEFAULT 0,
  error TEXT NOT NULL DEFAULT '',
  attempt_log TEXT NOT NULL DEFAULT '[]',
  next_attempt_at TEXT NOT NULL,
  lease_id TEXT NOT NULL DEFAULT '',
  lease_until TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL,
  finished_at TEXT NOT NULL DEFAULT ''
);
-- an event reaches a webhook once, whichever replica read it from the log (tests use event 0)
CREATE UNIQUE INDEX webhook_deliveries_event ON webhook_deliveries (webhook_id, event_id) WHERE event_id > 0;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, id);

-- How far the webhook dispatcher has read the event log: one row, moved forward in the same
-- transaction that queues the deliveries of the events it read (a compare-and-set, so two
-- replicas never queue the same stretch twice).
CREATE TABLE webhook_cursor (
  name TEXT PRIMARY KEY,
  last_event_id BIGINT NOT NULL
);
INSERT INTO webhook_cursor (name, last_event_id) SELECT 'events', COALESCE(MAX(id), 0) FROM events;
