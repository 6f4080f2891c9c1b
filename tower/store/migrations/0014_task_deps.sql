-- Pipelines (docs/pipelines.md): a task may wait for others (depends_on). The parents are kept
-- twice on purpose: as the child's immutable depends_on (JSON, read with the row like
-- capabilities) and as edges, one row per (parent, child), so a parent's success finds its
-- children through the primary key in O(children) and a child's unmet parents through
-- task_deps_child, never a scan of the mission. `step` is the name a pipeline gave the task.
ALTER TABLE tasks ADD COLUMN depends_on TEXT NOT NULL DEFAULT '[]';
ALTER TABLE tasks ADD COLUMN step TEXT NOT NULL DEFAULT '';

CREATE TABLE task_deps (
  parent_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
  child_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
  PRIMARY KEY (parent_id, child_id)
);
CREATE INDEX task_deps_child ON task_deps (child_id);
-- the steps of a mission by name (GetPipeline, unique names across runs into one mission)
CREATE INDEX tasks_mission_step ON tasks (mission_id, step) WHERE step <> '';
