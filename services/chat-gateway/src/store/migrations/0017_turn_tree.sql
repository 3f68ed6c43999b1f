-- Conversations as trees of turns: editing a message or regenerating an
-- answer makes a sibling of a turn instead of replacing it, and the
-- conversation remembers which branch is current. Portable SQL, like 0001.
--
-- Nothing existing is rewritten: a NULL parent means "the turn before me"
-- (the turn of this conversation at turn_index - 1, none for turn 0), which
-- is what every turn written before branching is. Turns written once a
-- conversation has branches always name their parent: a turn id, or ''
-- for a first message edited (a root beside turn 0).
ALTER TABLE turns ADD COLUMN parent_turn_id TEXT;
-- What GetConversation and the history read (their siblings, their path).
CREATE INDEX turns_by_parent ON turns (conversation_id, parent_turn_id);

-- The last turn of the conversation's current branch. NULL: the
-- conversation never branched, and its branch ends at its latest turn.
ALTER TABLE conversations ADD COLUMN current_leaf TEXT;
