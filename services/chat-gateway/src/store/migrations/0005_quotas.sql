-- Per-user and per-tenant limits (store/quota.rs) count a caller's turns
-- from this table, so that every replica sees the same counts: running
-- turns (freed by the lease sweep when a replica dies), turns started in
-- the last minute, and the tokens of the turns started today (UTC).
-- The tenant key (issuer and tenant) of the turn's caller; NULL without one.
ALTER TABLE turns ADD COLUMN tenant TEXT;
-- Input + output tokens the turn used, recorded when it ends.
ALTER TABLE turns ADD COLUMN tokens BIGINT NOT NULL DEFAULT 0;
CREATE INDEX turns_by_owner_age ON turns (owner, created_at);
CREATE INDEX turns_by_tenant_age ON turns (tenant, created_at) WHERE tenant IS NOT NULL;
