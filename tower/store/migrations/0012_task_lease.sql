-- A lease id per claim (a fencing token): every claim writes a new one, and start, heartbeat,
-- progress, complete and fail about that run name it. Kept after the task leaves its claim (the
-- claim that finished it); a new claim overwrites it.
ALTER TABLE tasks ADD COLUMN lease_id TEXT NOT NULL DEFAULT '';
