-- capsweepd store, version 2: which step a sweep is running and how many times it was
-- started. A step that takes the process down (a crash, an out-of-memory kill) is started
-- again on resume; one started a third time is refused and the sweep fails, instead of
-- resuming forever.

ALTER TABLE sweeps ADD COLUMN attempt_step INTEGER;
ALTER TABLE sweeps ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
