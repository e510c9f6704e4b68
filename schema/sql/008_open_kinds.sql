-- capsweepd store, version 8: a job's kind is any name in the service's kinds table (the four
-- kinds capsweep has, and a kind registered beside them), no longer a list fixed here: the
-- table is the one place a kind is named. A step's kind stays a fixed list (the step kinds
-- the load engine runs). The table is rebuilt as in version 6 (new table, copy, drop, rename,
-- with foreign keys off); its columns and index are as they were.

CREATE TABLE sweeps_v8 (
  seq            INTEGER PRIMARY KEY AUTOINCREMENT,  -- creation order (newest first in lists)
  id             TEXT NOT NULL UNIQUE,
  name           TEXT NOT NULL DEFAULT '',
  kind           TEXT NOT NULL CHECK (length(kind) BETWEEN 1 AND 64),  -- a name in the kinds table
  target_key     TEXT NOT NULL,                      -- target.base_url (a regression: the baseline's)
  status         TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  spec           TEXT NOT NULL,                      -- the spec with defaults, header values removed
  secret_headers TEXT NOT NULL DEFAULT '{}',         -- target.headers: used for the run, never returned
  result         TEXT,                               -- JSON once succeeded
  error          TEXT,                               -- why it failed
  progress       TEXT,                               -- JSON of the last progress report
  resumable      INTEGER NOT NULL DEFAULT 0,         -- stopped by SIGTERM mid-run
  created_at     TEXT NOT NULL,
  started_at     TEXT,
  finished_at    TEXT,
  updated_at     TEXT NOT NULL,
  attempt_step   INTEGER,                            -- the step being run (see version 2)
  attempts       INTEGER NOT NULL DEFAULT 0
);
INSERT INTO sweeps_v8 (seq, id, name, kind, target_key, status, spec, secret_headers, result, error, progress,
                       resumable, created_at, started_at, finished_at, updated_at, attempt_step, attempts)
  SELECT seq, id, name, kind, target_key, status, spec, secret_headers, result, error, progress,
         resumable, created_at, started_at, finished_at, updated_at, attempt_step, attempts FROM sweeps;
DROP TABLE sweeps;
ALTER TABLE sweeps_v8 RENAME TO sweeps;
CREATE INDEX sweeps_status ON sweeps (status, seq);
