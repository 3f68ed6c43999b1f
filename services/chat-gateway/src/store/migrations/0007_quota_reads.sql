-- Quotas read a caller's usage as each of their turns begins, inside the
-- transaction that inserts it (store/quota.rs): each read must cost the
-- same whatever the caller's history, or one long-lived user (or tenant)
-- slows every turn start behind the same writer.
--
-- Running turns, per user and per tenant.
CREATE INDEX turns_running_by_owner ON turns (owner) WHERE state = 'running';
CREATE INDEX turns_running_by_tenant ON turns (tenant) WHERE state = 'running';

-- Input + output tokens per user and per tenant per UTC day of the turns'
-- starts, added to as each turn ends (the same figure the old read summed
-- from `turns`, which grew with the day's turns). Days before yesterday
-- are pruned beside the wire log.
CREATE TABLE quota_tokens (
    -- 'user' or 'tenant'.
    scope  TEXT   NOT NULL,
    -- The owner, or the tenant key.
    key    TEXT   NOT NULL,
    -- 00:00 UTC of the day, Unix ms.
    day    BIGINT NOT NULL,
    tokens BIGINT NOT NULL,
    PRIMARY KEY (scope, key, day)
);

INSERT INTO quota_tokens (scope, key, day, tokens)
SELECT 'user', owner, created_at - created_at % 86400000, sum(tokens)
FROM turns WHERE tokens > 0
GROUP BY owner, created_at - created_at % 86400000;

INSERT INTO quota_tokens (scope, key, day, tokens)
SELECT 'tenant', tenant, created_at - created_at % 86400000, sum(tokens)
FROM turns WHERE tokens > 0 AND tenant IS NOT NULL
GROUP BY tenant, created_at - created_at % 86400000;
