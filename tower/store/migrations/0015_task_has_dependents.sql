-- Pipelines (docs/pipelines.md): a task that another depends on says so on its own row, set in
-- the child's creating transaction by the same UPDATE that reads the parent. That update takes
-- the parent's row lock, which the parent's outcome takes too, so on PostgreSQL a child made on
-- one connection while its parent's outcome commits on another sees the outcome or is seen by
-- it (never a child waiting for a parent that is final). And an outcome of a task nobody depends
-- on — nearly every task — reads no edges at all.
ALTER TABLE tasks ADD COLUMN has_dependents INTEGER NOT NULL DEFAULT 0;
UPDATE tasks SET has_dependents = 1 WHERE id IN (SELECT parent_id FROM task_deps);
