-- capsweepd store, version 5: uploaded prompt datasets, content-addressed (the id is made
-- from the SHA-256 of the bytes, so one content is stored once). Jobs name them in
-- workload.dataset.id; the bytes stay as uploaded.

CREATE TABLE datasets (
  id          TEXT PRIMARY KEY,                   -- "ds-" and the first 16 hex digits of sha256
  name        TEXT NOT NULL DEFAULT '',
  format      TEXT NOT NULL CHECK (format IN ('jsonl', 'sharegpt')),
  sha256      TEXT NOT NULL UNIQUE,
  bytes       INTEGER NOT NULL,
  items       INTEGER NOT NULL,
  stats       TEXT NOT NULL,                      -- JSON: prompt and output length percentiles
  content     BLOB NOT NULL,
  created_at  TEXT NOT NULL
);
