-- capsweepd store, version 4: steps of concurrency sweeps (kind 'level': a closed-loop step
-- of N users). SQLite cannot change a CHECK constraint in place: the table is rebuilt by the
-- documented procedure (new table, copy, drop, rename), which runs with foreign keys off.

CREATE TABLE steps_v4 (
  sweep_id          TEXT NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
  step_index        INTEGER NOT NULL,                -- 0-based order within the sweep
  kind              TEXT NOT NULL CHECK (kind IN ('baseline', 'probe', 'ladder', 'refine', 'check', 'level')),
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
INSERT INTO steps_v4 SELECT * FROM steps;
DROP TABLE steps;
ALTER TABLE steps_v4 RENAME TO steps;
