-- How many events the replica running a turn may stream to its clients
-- ahead of the turn's stored wire log (`turns.stream_ahead` when the turn
-- began). A sweep that ends a turn whose replica died numbers the turn's
-- `error` after last_event_seq + stream_ahead, so a resuming client never
-- gets a seq it has already seen.
ALTER TABLE turns ADD COLUMN stream_ahead BIGINT NOT NULL DEFAULT 0;
