#pragma once
// The SQLite repository of capsweepd; all SQL lives here and in schema/sql. Migrations
// (schema/sql/NNN_*.sql, compiled in) are applied in order when the store opens and the
// version is recorded. WAL mode, a busy timeout and foreign keys are on. A step is written
// with its request records and server summary in one transaction, so a crash loses at most
// the step in flight. The database file (and so its -wal and -shm) is created readable by
// its owner only (0600): it holds the targets' secret headers. Thread-safe: one connection
// per Store, calls serialised by a mutex;
// open one Store per thread that writes a lot (WAL lets readers run beside the writer).
// Infrastructure failures (disk full, corrupt file) throw StoreError.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/rows.hpp"

struct sqlite3;

namespace capsweep::store {

class StoreError : public std::runtime_error {
 public:
  explicit StoreError(const std::string& what, int sqlite_code = 0) : std::runtime_error(what), code_(sqlite_code) {}
  // The SQLite result code (primary, e.g. SQLITE_FULL) when SQLite reported the failure.
  int sqlite_code() const noexcept { return code_; }

 private:
  int code_;
};

// The current UTC time as "2026-11-30T01:02:03.456Z".
std::string utc_now();
std::string format_utc(std::chrono::system_clock::time_point when);
// Parses utc_now()'s format back; nullopt for anything else.
std::optional<std::chrono::system_clock::time_point> parse_utc(const std::string& text);

class Store {
 public:
  // Opens (creating when absent) and migrates the database. Throws StoreError.
  explicit Store(const std::string& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  int schema_version();
  // Bytes of the database file and its WAL on disk.
  std::uint64_t size_bytes() const;
  // Hands the page cache's unused memory back (after a step was stored: the pages it wrote
  // are not read again soon).
  void release_memory();
  // Whether the database takes writes now (readiness): a write transaction can be begun, and
  // no write failed for lack of space or an I/O error in the last 30 s.
  bool writable();

  void insert_sweep(const SweepRow& s);
  std::optional<SweepRow> sweep(const std::string& id);
  // Newest first; `status` filters when given.
  std::vector<SweepRow> list_sweeps(const std::optional<std::string>& status, int limit, int offset);
  std::map<std::string, std::uint64_t> count_by_status();
  std::uint64_t count_status(const std::string& status);

  // Sets the status when it is `from` now; false otherwise (someone else moved it).
  // Stamps started_at on "running" and finished_at on terminal statuses.
  bool transition(const std::string& id, const std::string& from, const std::string& to);
  // Terminal writes: result (succeeded) or error (failed, cancelled).
  void finish_sweep(const std::string& id, const std::string& status, const nlohmann::json& result,
                    const std::string& error);
  void set_progress(const std::string& id, const nlohmann::json& progress);
  void set_resumable(const std::string& id, bool resumable);
  // Records that step `step_index` of the sweep starts; returns how many times it has been
  // started (1 the first time; more when earlier starts never ended, e.g. a crash).
  int begin_step_attempt(const std::string& id, int step_index);
  // The step ended (stored, or stopped cleanly): its start count is cleared.
  void end_step_attempt(const std::string& id);
  // Removes finished sweeps older than `max_age_s` (0: none) and beyond the newest
  // `max_sweeps` finished ones (0: none); returns how many were removed.
  std::uint64_t prune_finished(double max_age_s, std::uint64_t max_sweeps);
  // Deletes a sweep that is not running (with its steps and records); false when absent or running.
  bool delete_sweep(const std::string& id);

  std::vector<StepRow> steps(const std::string& sweep_id);
  // Writes one step with its records in one transaction. The step's index must be the next
  // one (the number of stored steps); otherwise nothing is written and StoreError is thrown.
  void append_step(const std::string& sweep_id, const StepRow& step, const std::vector<RequestRow>& requests,
                   const std::vector<QualityItemRow>& items = {});
  // One page of a sweep's quality items after (step, item) = `after` (nullopt: from the start),
  // at most `limit`, in step then item order.
  struct ItemKey {
    int step = 0;
    int item = 0;
  };
  std::vector<std::pair<int, QualityItemRow>> quality_page(const std::string& sweep_id, std::optional<ItemKey> after,
                                                           std::size_t limit);
  // One page of the sweep's requests after (step, request) = `after` (nullopt: from the
  // start), at most `limit`, in export order. Steps are immutable once stored, so paging by
  // key gives the same rows as one long read.
  struct RequestKey {
    int step = 0;
    std::uint64_t request = 0;
  };
  std::vector<std::pair<int, RequestRow>> requests_page(const std::string& sweep_id, std::optional<RequestKey> after,
                                                        std::size_t limit);
  // The requests of one step in request order, at most `limit`.
  std::vector<RequestRow> step_requests(const std::string& sweep_id, int step, std::size_t limit);
  // A scenario's windows: written as they are made (one short transaction each), read back in
  // order; cleared when the scenario's step starts again after a crash.
  void append_window(const std::string& sweep_id, int index, double t_start_s, const nlohmann::json& row);
  std::vector<nlohmann::json> windows(const std::string& sweep_id);
  void clear_windows(const std::string& sweep_id);

  // Stores a dataset unless one with its sha256 is stored; the stored row either way, and
  // whether this call inserted it. `content` is bound in place, not copied.
  std::pair<DatasetRow, bool> insert_dataset(const DatasetRow& d, std::string_view content);
  std::optional<DatasetRow> dataset(const std::string& id);
  // The dataset's bytes as uploaded; nullopt when absent.
  std::optional<std::string> dataset_content(const std::string& id);
  // Newest first.
  std::vector<DatasetRow> list_datasets(int limit, int offset);
  // Queued or running jobs whose spec names the dataset (workload.dataset.id, quality.dataset.id).
  std::vector<std::string> jobs_using_dataset(const std::string& id);
  enum class DeleteDataset { deleted, absent, in_use };
  // Deletes a dataset no queued or running job names, in one transaction with that check.
  DeleteDataset delete_dataset(const std::string& id);

  // Test hook: caps the database's size in pages, as a full disk would.
  void limit_pages_for_test(std::int64_t pages);
  // Test hook: how long writable() says no after a failed write (30 s otherwise).
  void set_write_retry_for_test(std::chrono::nanoseconds after);

  // When a write last failed for lack of space or I/O (0: it did not), per database file.
  struct WriteFailure {
    std::atomic<std::int64_t> at_ns{0};  // steady_clock
    std::atomic<std::chrono::nanoseconds> retry_after{std::chrono::seconds(30)};
  };

 private:
  void exec(const char* sql);
  void migrate();
  // Runs a write; records whether it failed for lack of space or I/O (see writable()).
  template <class F>
  void write(F&& f);
  void insert_sweep_locked(const SweepRow& s);
  void insert_requests(const std::string& sweep_id, int step_index, const std::vector<RequestRow>& requests);
  void insert_quality_items(const std::string& sweep_id, int step_index, const std::vector<QualityItemRow>& items);
  void append_step_locked(const std::string& sweep_id, const StepRow& step, const std::vector<RequestRow>& requests,
                          const std::vector<QualityItemRow>& items);
  std::string path_;
  std::shared_ptr<WriteFailure> write_failure_;  // shared by the Stores of one file
  sqlite3* db_ = nullptr;
  std::mutex mutex_;
};

// An exclusive advisory lock on "<database>.lock", held for a daemon's lifetime, so that two
// daemons never run jobs from one database. The file names the holder (pid, host, start).
class DaemonLock {
 public:
  // Takes the lock or throws StoreError naming the current holder.
  explicit DaemonLock(const std::string& db_path);
  ~DaemonLock();
  DaemonLock(const DaemonLock&) = delete;
  DaemonLock& operator=(const DaemonLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace capsweep::store
