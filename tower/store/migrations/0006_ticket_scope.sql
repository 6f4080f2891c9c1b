-- What a ticket or console session carries from the credential that made it (issue 14): the
-- source token id, domain, node and the source's own expiry, as JSON. A ticket is redeemed into
-- exactly that scope, re-checked against the source token; a console session (purpose
-- 'console') is a ticket that is not consumed by use, ends when its source token is revoked or
-- expires, and is consumed by logout.
ALTER TABLE tickets ADD COLUMN scope TEXT NOT NULL DEFAULT '{}';
