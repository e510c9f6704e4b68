-- capsweepd store, version 1: sweeps, their steps, per-request records and the target's
-- scraped gauges per step. Times are ISO-8601 UTC text (system clock); a step is written in
-- one transaction together with its requests and server summary.

CREATE TABLE sweeps (
  seq            INTEGER PRIMARY KEY AUTOINCREMENT,  -- creation order (newest first in lists)
  id             TEXT NOT NULL UNIQUE,
  name           TEXT NOT NULL DEFAULT '',
  kind           TEXT NOT NULL CHECK (kind IN ('sweep', 'check')),
  target_key     TEXT NOT NULL,                      -- target.base_url: one running sweep per target
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
  updated_at     TEXT NOT NULL
);
CREATE INDEX sweeps_status ON sweeps (status, seq);

CREATE TABLE steps (
  sweep_id          TEXT NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
  step_index        INTEGER NOT NULL,                -- 0-based order within the sweep
  kind              TEXT NOT NULL CHECK (kind IN ('baseline', 'probe', 'ladder', 'refine', 'check')),
  phase             TEXT NOT NULL,
  offered_rate_rps  REAL,                            -- NULL for baseline, probe and infinite rates
  verdict           TEXT NOT NULL CHECK (verdict IN ('pass', 'fail', 'inconclusive')),
  generator_limited INTEGER NOT NULL,
  summary           TEXT NOT NULL,                   -- step summary (vLLM keys)
  evaluation        TEXT NOT NULL,                   -- SLO criteria and saturation
  outcome           TEXT NOT NULL,                   -- what the orchestrator reads back
  started_at        TEXT NOT NULL,
  finished_at       TEXT NOT NULL,
  PRIMARY KEY (sweep_id, step_index)
);

CREATE TABLE requests (
  sweep_id      TEXT NOT NULL,
  step_index    INTEGER NOT NULL,
  request_index INTEGER NOT NULL,
  scheduled_ms  REAL NOT NULL,
  dispatched_ms REAL,
  sent_ms       REAL,
  finished_ms   REAL,
  ttft_ms       REAL,
  e2el_ms       REAL,
  input_tokens  INTEGER NOT NULL,
  output_tokens INTEGER NOT NULL,
  chunks        INTEGER NOT NULL,
  outcome       TEXT NOT NULL,
  FOREIGN KEY (sweep_id, step_index) REFERENCES steps (sweep_id, step_index) ON DELETE CASCADE
);
CREATE INDEX requests_step ON requests (sweep_id, step_index);

CREATE TABLE step_server_metrics (
  sweep_id   TEXT NOT NULL,
  step_index INTEGER NOT NULL,
  summary    TEXT NOT NULL,                          -- mean/max of the scraped gauges
  PRIMARY KEY (sweep_id, step_index),
  FOREIGN KEY (sweep_id, step_index) REFERENCES steps (sweep_id, step_index) ON DELETE CASCADE
);
