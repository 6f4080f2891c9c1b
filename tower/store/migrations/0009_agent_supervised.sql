-- Whether the agent's node supervises it (an agents.toml profile with supervise = true): the
-- console offers Restart, Pause and Resume only for those, and SuperviseAgent refuses the others.
ALTER TABLE agents ADD COLUMN supervised BOOLEAN NOT NULL DEFAULT FALSE;
