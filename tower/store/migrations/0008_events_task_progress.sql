-- One task's progress frames (the console's task page, `ep task watch`): ListEvents and streams
-- filtered by task_id and type progress. Only progress events are indexed, so the claim path
-- (task events, no progress) pays nothing for it; the store writes the type as a literal when
-- the filter is exactly [progress] so both dialects can use this partial index.
CREATE INDEX events_task_progress ON events (task_id, id) WHERE type = 'progress';
