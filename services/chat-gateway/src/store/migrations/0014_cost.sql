-- What turns cost: each conversation's total (added to by the UPDATE that
-- ends each turn, as 0013's token counts are) and each scope's spend per
-- day beside its tokens (read by the `cost_per_day` limits). The cost is
-- in micro-units of the runner's `[pricing] currency`; a conversation's
-- currency is that of its last priced turn. Portable SQL, like 0001.
ALTER TABLE conversations ADD COLUMN cost_micros BIGINT NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN currency TEXT NOT NULL DEFAULT '';
ALTER TABLE quota_tokens ADD COLUMN cost_micros BIGINT NOT NULL DEFAULT 0;
