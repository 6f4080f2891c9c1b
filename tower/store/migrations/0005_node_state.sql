-- The latest state report of each node (NodeService.ReportNodeState): its cron jobs and its
-- supervised agents as JSON arrays, replaced by every report. The tower's time of the report
-- says how fresh it is. Read by the list_cron_jobs and get_supervision tools on any replica.

CREATE TABLE node_state (
  node_id TEXT PRIMARY KEY REFERENCES nodes(id) ON DELETE CASCADE,
  cron_jobs TEXT NOT NULL,
  supervised TEXT NOT NULL,
  config_errors TEXT NOT NULL,
  reported_at TEXT NOT NULL
);
