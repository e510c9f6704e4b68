-- capsweepd store, version 3: per-request rows in export order, so requests.csv is read in
-- short pages (keyset pagination) instead of one long query under the store's lock.

CREATE INDEX requests_order ON requests (sweep_id, step_index, request_index);
