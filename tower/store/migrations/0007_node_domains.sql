-- The domains a node serves (issue 14): '*' for all domains, else the domain ids joined by
-- commas. Registration says which (`ep agent node register --domain`, repeatable); without it a
-- node serves all domains, recorded explicitly so the wide grant is always a visible choice. A
-- node enrolls agents, claims and reads only in its domains.
ALTER TABLE nodes ADD COLUMN domains TEXT NOT NULL DEFAULT '*';
