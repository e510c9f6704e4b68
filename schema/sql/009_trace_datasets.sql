-- capsweepd store, version 9: a dataset may be a timestamped trace (format 'trace': JSONL rows
-- of timestamp, input_length, output_length and hash_ids), replayed by a check job. The table
-- is rebuilt as in version 8 (new table, copy, drop, rename) to widen the format's CHECK; its
-- columns are as they were.

CREATE TABLE datasets_v9 (
  id          TEXT PRIMARY KEY,                   -- "ds-" and the first 16 hex digits of sha256
  name        TEXT NOT NULL DEFAULT '',
  format      TEXT NOT NULL CHECK (format IN ('jsonl', 'sharegpt', 'trace')),
  sha256      TEXT NOT NULL UNIQUE,
  bytes       INTEGER NOT NULL,
  items       INTEGER NOT NULL,
  stats       TEXT NOT NULL,                      -- JSON: prompt and output length percentiles
  content     BLOB NOT NULL,
  created_at  TEXT NOT NULL
);
INSERT INTO datasets_v9 (id, name, format, sha256, bytes, items, stats, content, created_at)
  SELECT id, name, format, sha256, bytes, items, stats, content, created_at FROM datasets;
DROP TABLE datasets;
ALTER TABLE datasets_v9 RENAME TO datasets;
