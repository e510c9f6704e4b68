-- capsweepd store, version 10: a request may be one turn of a multi-turn session
-- (workload.sessions): its 1-based turn index; NULL for a request that is not a session's.
ALTER TABLE requests ADD COLUMN turn INTEGER;
