-- Turns per minute are counted in a ledger of admissions that deleting a
-- conversation does not touch (store/quota.rs): counted from `turns`, a
-- loop of "chat in a new conversation, delete it" never reached the limit.
-- One row per admitted turn, written by the statement that inserts the
-- turn; rows older than the longest window read are pruned in bounded
-- batches beside the token counts.
CREATE TABLE quota_admissions (
    -- Unix ms of the admission (the turn's created_at).
    created_at BIGINT NOT NULL,
    turn_id    TEXT   NOT NULL,
    -- The user's owner key.
    owner      TEXT   NOT NULL,
    -- The tenant key; NULL without one.
    tenant     TEXT,
    -- The pruning order (oldest first).
    PRIMARY KEY (created_at, turn_id)
);

CREATE INDEX quota_admissions_by_owner ON quota_admissions (owner, created_at);
CREATE INDEX quota_admissions_by_tenant ON quota_admissions (tenant, created_at) WHERE tenant IS NOT NULL;

-- The last minute's admissions carried over, so the upgrade opens no
-- window; older turns no longer count against anything.
INSERT INTO quota_admissions (created_at, turn_id, owner, tenant)
SELECT created_at, id, owner, tenant FROM turns
WHERE created_at > (SELECT max(created_at) FROM turns) - 60000;

-- Only the ledger reads a caller's turns by age now.
DROP INDEX turns_by_owner_age;
DROP INDEX turns_by_tenant_age;
