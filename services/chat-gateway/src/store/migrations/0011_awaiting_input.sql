-- Turns that pause for the user's decisions on their tool calls
-- (SubmitToolDecisions): such a turn's state is 'awaiting_input', and no
-- replica holds it (no lease). Portable SQL, like 0001.

-- What the turn's continuation needs (base64 of the gateway's
-- prost-encoded `Continuation`, see turn/pause.rs); cleared when the turn
-- ends.
ALTER TABLE turns ADD COLUMN continuation TEXT;
-- Until when (Unix ms, on the store's clock) the pause waits; then any
-- replica closes the turn as if every pending call were declined.
ALTER TABLE turns ADD COLUMN input_until BIGINT;
-- The request id of the SubmitToolDecisions call that continued the turn:
-- a retried submission with it attaches instead of being refused.
ALTER TABLE turns ADD COLUMN decisions_request_id TEXT;

-- What the expiry sweep looks for.
CREATE INDEX turns_awaiting_input ON turns (input_until) WHERE state = 'awaiting_input';
-- A user's paused turns, counted against `turns.per_user.awaiting`.
CREATE INDEX turns_awaiting_by_owner ON turns (owner) WHERE state = 'awaiting_input';
-- A tenant's paused turns, counted against `turns.per_tenant.awaiting`.
CREATE INDEX turns_awaiting_by_tenant ON turns (tenant) WHERE state = 'awaiting_input';
