-- What the user did with a turn, and where its trace is. Portable SQL,
-- like 0001. (Version 10 was never used.)

-- The user's decision on the turn's proposal card (RecordPayloadDecision),
-- JSON (see store/model.rs, `StoredDecision`); the last one recorded wins.
ALTER TABLE turns ADD COLUMN payload_decision TEXT;
-- The user's rating of the turn (SubmitFeedback), JSON (`StoredFeedback`);
-- the last one submitted wins.
ALTER TABLE turns ADD COLUMN feedback TEXT;
-- The W3C `traceparent` of the call that began the turn, when it was
-- traced: decisions and ratings are recorded as span events on that trace.
ALTER TABLE turns ADD COLUMN trace_parent TEXT;
