-- Rolling summaries of the turns a model's context window no longer holds
-- (`turns.history_strategy = "summarize"`). A summary covers a branch from
-- its first turn through `turn_id`; every branch through that turn may use
-- it, so a summary needs no branch of its own. Portable SQL, like 0001.
CREATE TABLE summaries (
    turn_id         TEXT   NOT NULL PRIMARY KEY REFERENCES turns (id) ON DELETE CASCADE,
    conversation_id TEXT   NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    owner           TEXT   NOT NULL,
    -- The covered turn's turn_index: on a branch, the turns at or before it.
    turn_index      BIGINT NOT NULL,
    text            TEXT   NOT NULL,
    created_at      BIGINT NOT NULL
);
CREATE INDEX summaries_by_conversation ON summaries (conversation_id, turn_index);
