-- capsweepd store, version 7: each request's inter-token latencies, as its own list (vLLM's
-- per-request itls): one value per generated token gap in milliseconds, a chunk of k tokens
-- giving k gaps of its gap / k (the samples the step's ITL percentiles pool), written as
-- space-separated decimals; NULL for a request with fewer than two tokens and for rows
-- stored before this version.

ALTER TABLE requests ADD COLUMN itl_ms TEXT;
