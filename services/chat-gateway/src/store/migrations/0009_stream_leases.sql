-- The event streams (Chat, ExecuteAction, ResumeTurn) open on every
-- replica, so that a user's (and a tenant's) streams are counted across
-- replicas (store/streams.rs). A row is written when a stream opens (with
-- its turn's first statement for Chat and ExecuteAction) and deleted when
-- it closes; its replica renews `expires_at` with its turn leases, so the
-- rows of a replica that died stop counting once they expire. Times are
-- the database's clock (Unix ms), whichever replica compares them.
CREATE TABLE stream_leases (
    id         TEXT   NOT NULL PRIMARY KEY,
    -- The user's owner key.
    owner      TEXT   NOT NULL,
    -- The tenant key; NULL without one.
    tenant     TEXT,
    -- The replica serving the stream.
    replica    TEXT   NOT NULL,
    -- Until when the stream counts unless its replica renews it.
    expires_at BIGINT NOT NULL
);

CREATE INDEX stream_leases_by_owner ON stream_leases (owner, expires_at);
CREATE INDEX stream_leases_by_tenant ON stream_leases (tenant, expires_at) WHERE tenant IS NOT NULL;
CREATE INDEX stream_leases_by_replica ON stream_leases (replica);
CREATE INDEX stream_leases_by_expiry ON stream_leases (expires_at);
