-- Until when a client following a turn from another replica (ResumeTurn)
-- last said it is still there (Unix ms). The replica running the turn
-- cancels it once nobody follows it there and this is in the past for
-- turns.abandoned_turn_grace (turn/replica.rs).
ALTER TABLE turns ADD COLUMN watched_until BIGINT;
