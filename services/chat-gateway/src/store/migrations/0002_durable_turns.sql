-- Turns as durable objects that every gateway replica can see, stop, follow
-- and recover (see store/turns.rs). Portable SQL, like 0001.

-- Which replica runs a running turn, and until when its lease holds; the
-- replica renews it, and any replica ends a turn whose lease expired.
ALTER TABLE turns ADD COLUMN replica TEXT;
ALTER TABLE turns ADD COLUMN lease_until BIGINT;
-- Set by CancelTurn on any replica; the running replica stops the turn.
ALTER TABLE turns ADD COLUMN cancel_requested BIGINT NOT NULL DEFAULT 0;
-- For a failed turn: whether sending the same message again may succeed (a
-- retried request id then runs again instead of replaying the failure).
ALTER TABLE turns ADD COLUMN retryable BIGINT NOT NULL DEFAULT 0;
-- The seq of the last wire event stored in turn_events.
ALTER TABLE turns ADD COLUMN last_event_seq BIGINT NOT NULL DEFAULT 0;

-- Turns left running by a version that did not enforce one running turn
-- per conversation: all but the newest (ids are time-ordered) are ended, so
-- the index below can be built. The newest has no lease and is ended by the
-- first replica that sweeps.
UPDATE turns SET state = 'failed', retryable = 1, finished_at = created_at
WHERE state = 'running' AND EXISTS (
    SELECT 1 FROM turns AS newer
    WHERE newer.conversation_id = turns.conversation_id
      AND newer.state = 'running' AND newer.id > turns.id);

-- At most one running turn per conversation, whichever replica runs it.
CREATE UNIQUE INDEX turns_one_running ON turns (conversation_id) WHERE state = 'running';
-- What lease renewal and the sweep look for.
CREATE INDEX turns_running_by_replica ON turns (replica) WHERE state = 'running';

-- The wire events of turns (`ChatEvent`s exactly as streamed), in batches:
-- one row per flush, holding events first_seq..=last_seq, so any replica
-- can resume a client's stream exactly. Pruned after `resume_retention`.
CREATE TABLE turn_events (
    turn_id    TEXT   NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    first_seq  BIGINT NOT NULL,
    last_seq   BIGINT NOT NULL,
    -- base64 of the length-delimited, prost-encoded ChatEvents.
    events     TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (turn_id, first_seq)
);

CREATE INDEX turn_events_by_age ON turn_events (created_at);
