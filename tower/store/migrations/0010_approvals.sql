-- What agents ask a person to allow (ApprovalService): one row per tool-permission request of an
-- agent running with permission = "ask". status: pending | approved | rejected | expired. The
-- JSON columns hold the call's arguments, the paths it touches and the options the agent offers.
CREATE TABLE approvals (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  domain_id TEXT NOT NULL,
  mission_id TEXT NOT NULL DEFAULT '',
  task_id TEXT NOT NULL DEFAULT '',
  agent_id TEXT NOT NULL DEFAULT '',
  node_id TEXT NOT NULL DEFAULT '',
  tool TEXT NOT NULL,
  title TEXT NOT NULL DEFAULT '',
  arguments TEXT NOT NULL DEFAULT '{}',
  paths TEXT NOT NULL DEFAULT '[]',
  options TEXT NOT NULL DEFAULT '[]',
  status TEXT NOT NULL,
  option_id TEXT NOT NULL DEFAULT '',
  decided_by TEXT NOT NULL DEFAULT '',
  decided_at TEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL
);
CREATE INDEX approvals_pending ON approvals (status, created_at);
CREATE INDEX approvals_task ON approvals (task_id);
