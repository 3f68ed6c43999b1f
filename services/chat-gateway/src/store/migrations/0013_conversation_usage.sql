-- A conversation's usage, summed over its ended turns by the write that
-- ends each turn (the UPDATE of `conversations` that write already makes),
-- so GetConversation returns the total without reading every turn. Portable
-- SQL, like 0001. Turns that ended before this migration are not counted.
ALTER TABLE conversations ADD COLUMN input_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN output_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN cached_input_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN cache_write_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN reasoning_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN model_calls BIGINT NOT NULL DEFAULT 0;
