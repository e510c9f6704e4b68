-- capsweepd store, version 6: regression and scenario jobs. A job's kind may be 'regression'
-- or 'scenario'; a step may be a regression's timed run ('run') or its answers to the quality
-- items ('quality'), naming the side it measured (role: 'baseline' or 'candidate') and its
-- round (for a quality step, its pass), or a scenario's time-varying load ('scenario'). The
-- quality answers, with each check's verdict, are kept per item; a scenario's windows are
-- kept as they are made. SQLite cannot change a CHECK
-- constraint in place: both tables are rebuilt by the documented procedure (new table, copy,
-- drop, rename), which runs with foreign keys off, so no row cascades away.

CREATE TABLE sweeps_v6 (
  seq            INTEGER PRIMARY KEY AUTOINCREMENT,  -- creation order (newest first in lists)
  id             TEXT NOT NULL UNIQUE,
  name           TEXT NOT NULL DEFAULT '',
  kind           TEXT NOT NULL CHECK (kind IN ('sweep', 'check', 'regression', 'scenario')),
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
INSERT INTO sweeps_v6 (seq, id, name, kind, target_key, status, spec, secret_headers, result, error, progress,
                       resumable, created_at, started_at, finished_at, updated_at, attempt_step, attempts)
  SELECT seq, id, name, kind, target_key, status, spec, secret_headers, result, error, progress,
         resumable, created_at, started_at, finished_at, updated_at, attempt_step, attempts FROM sweeps;
DROP TABLE sweeps;
ALTER TABLE sweeps_v6 RENAME TO sweeps;
CREATE INDEX sweeps_status ON sweeps (status, seq);

CREATE TABLE steps_v6 (
  sweep_id          TEXT NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
  step_index        INTEGER NOT NULL,                -- 0-based order within the sweep
  kind              TEXT NOT NULL CHECK (kind IN ('baseline', 'probe', 'ladder', 'refine', 'check', 'level',
                                                  'run', 'quality', 'scenario')),
  phase             TEXT NOT NULL,
  offered_rate_rps  REAL,                            -- NULL for baseline, probe and infinite rates
  verdict           TEXT NOT NULL CHECK (verdict IN ('pass', 'fail', 'inconclusive')),
  generator_limited INTEGER NOT NULL,
  summary           TEXT NOT NULL,                   -- step summary (vLLM keys)
  evaluation        TEXT NOT NULL,                   -- SLO criteria and saturation
  outcome           TEXT NOT NULL,                   -- what the orchestrator reads back
  started_at        TEXT NOT NULL,
  finished_at       TEXT NOT NULL,
  role              TEXT CHECK (role IN ('baseline', 'candidate')),  -- regression steps
  round             INTEGER,                         -- regression: the run's round, a quality step's pass
  PRIMARY KEY (sweep_id, step_index)
);
INSERT INTO steps_v6 (sweep_id, step_index, kind, phase, offered_rate_rps, verdict, generator_limited, summary,
                      evaluation, outcome, started_at, finished_at)
  SELECT sweep_id, step_index, kind, phase, offered_rate_rps, verdict, generator_limited, summary,
         evaluation, outcome, started_at, finished_at FROM steps;
DROP TABLE steps;
ALTER TABLE steps_v6 RENAME TO steps;

CREATE TABLE quality_items (
  sweep_id          TEXT NOT NULL,
  step_index        INTEGER NOT NULL,
  item_index        INTEGER NOT NULL,                -- 0-based position among the items asked
  entry_index       INTEGER NOT NULL,                -- the dataset item (0-based)
  outcome           TEXT NOT NULL,                   -- ok, connect, http_5xx, ...
  finish_reason     TEXT,
  completion_tokens INTEGER,
  max_tokens        INTEGER NOT NULL,
  answer            TEXT NOT NULL,                   -- the answer's text (capped)
  tool_calls        TEXT NOT NULL,                   -- JSON: [{"name", "arguments"}]
  verdicts          TEXT NOT NULL,                   -- JSON: {"json": {"ok", "reason"}, ...}
  score             REAL,                            -- the judge's score, when one was asked
  PRIMARY KEY (sweep_id, step_index, item_index),
  FOREIGN KEY (sweep_id, step_index) REFERENCES steps (sweep_id, step_index) ON DELETE CASCADE
);

CREATE TABLE scenario_windows (
  sweep_id     TEXT NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
  window_index INTEGER NOT NULL,                  -- 0-based, window_s apart
  t_start_s    REAL NOT NULL,
  row          TEXT NOT NULL,                     -- JSON: the window's figures, replicas, events
  PRIMARY KEY (sweep_id, window_index)
);
