#include "store/store.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string_view>
#include <utility>

#include "core/time.hpp"
#include "store/sqlite.hpp"

namespace capsweep::store {

// The migrations compiled in from schema/sql (cmake/embed.cmake).
std::vector<std::pair<std::string_view, std::string_view>> migrations();

namespace {

using namespace detail;

constexpr const char* kSweepColumns =
    "id, name, kind, target_key, status, spec, secret_headers, result, error, progress, resumable, "
    "created_at, started_at, finished_at, updated_at";

SweepRow sweep_from(const Stmt& s) {
  SweepRow r;
  r.id = s.text(0);
  r.name = s.text(1);
  r.kind = s.text(2);
  r.target_key = s.text(3);
  r.status = s.text(4);
  r.spec = s.json_at(5);
  r.secret_headers = s.json_at(6);
  r.result = s.json_at(7);
  r.error = s.text(8);
  r.progress = s.json_at(9);
  r.resumable = s.integer(10) != 0;
  r.created_at = s.text(11);
  r.started_at = s.text(12);
  r.finished_at = s.text(13);
  r.updated_at = s.text(14);
  return r;
}

bool terminal(std::string_view status) {
  return status == "succeeded" || status == "failed" || status == "cancelled";
}

}  // namespace

std::string format_utc(std::chrono::system_clock::time_point when) {
  return utc_text(when);
}

std::string utc_now() {
  return format_utc(std::chrono::system_clock::now());
}

std::optional<std::chrono::system_clock::time_point> parse_utc(const std::string& text) {
  std::tm tm{};
  int ms = 0;
  if (text.size() != 24 || std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon,
                                       &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const std::time_t t = timegm(&tm);
  if (t == -1) return std::nullopt;
  return std::chrono::system_clock::from_time_t(t) + std::chrono::milliseconds(ms);
}

// One record per database file, shared by every Store of the process on it: the API's
// connection learns of a write the manager's connection could not make.
std::shared_ptr<Store::WriteFailure> failure_record(const std::string& path) {
  static std::mutex m;
  static std::map<std::string, std::shared_ptr<Store::WriteFailure>> records;
  std::lock_guard lock(m);
  auto& f = records[path];
  if (!f) f = std::make_shared<Store::WriteFailure>();
  return f;
}

Store::Store(const std::string& path) : path_(path), write_failure_(failure_record(path)) {
  // Owner-only permissions before SQLite opens it: SQLite gives -wal and -shm the same mode.
  if (path != ":memory:" && !path.empty()) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) throw StoreError(fmt::format("cannot open database {}: {}", path, std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) == 0 && (st.st_mode & 0077) != 0) ::fchmod(fd, st.st_mode & 0700);
    ::close(fd);
  }
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
  if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw StoreError(fmt::format("cannot open database {}: {}", path, msg));
  }
  sqlite3_busy_timeout(db_, 10'000);
  try {
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=NORMAL");
    // Rows are written once and read back rarely (exports page through them once): a large
    // page cache would only hold memory that grows with the database, up to 2 MiB a
    // connection by default. The operating system's file cache still serves re-reads.
    exec("PRAGMA cache_size=-512");
    // Migrations run before foreign keys are enforced: a table rebuild (new table, copy, drop,
    // rename) must not cascade the drop into the rows that reference it.
    migrate();
    exec("PRAGMA foreign_keys=ON");
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

void Store::release_memory() {
  std::lock_guard lock(mutex_);
  sqlite3_db_release_memory(db_);
}

Store::~Store() {
  if (db_) sqlite3_close(db_);
}

void Store::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    throw StoreError(fmt::format("sqlite: {}", msg));
  }
}

void Store::migrate() {
  exec(
      "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
      "applied_at TEXT NOT NULL)");
  auto files = migrations();
  std::sort(files.begin(), files.end());
  for (const auto& [name, sql] : files) {
    const int version = std::atoi(std::string(name.substr(0, name.find('_'))).c_str());
    if (version <= 0) throw StoreError(fmt::format("migration {} has no NNN_ number", name));
    Transaction tx(db_);
    {
      Stmt q(db_, "SELECT 1 FROM schema_version WHERE version = ?");
      q.bind(1, version);
      if (q.step()) continue;  // applied (the transaction rolls back, nothing was written)
    }
    exec(std::string(sql).c_str());
    Stmt ins(db_, "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)");
    ins.bind(1, version).bind(2, name).bind(3, utc_now());
    ins.step();
    tx.commit();
  }
}

std::uint64_t Store::size_bytes() const {
  std::uint64_t total = 0;
  for (const std::string& p : {path_, path_ + "-wal"}) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) total += static_cast<std::uint64_t>(st.st_size);
  }
  return total;
}

DaemonLock::DaemonLock(const std::string& db_path) {
  const std::string path = db_path + ".lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) throw StoreError(fmt::format("cannot open lock file {}: {}", path, std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    std::string holder(256, '\0');
    const auto n = ::pread(fd_, holder.data(), holder.size(), 0);
    holder.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
    ::close(fd_);
    fd_ = -1;
    throw StoreError(fmt::format("database {} is in use by another capsweepd ({}); refusing to start", db_path,
                                 holder.empty() ? "holder unknown" : holder));
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string who = fmt::format("pid {} on {}, since {}\n", ::getpid(), host, utc_now());
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, who.data(), who.size(), 0) < 0) {
    // The lock holds all the same; only the holder's description is missing.
  }
}

DaemonLock::~DaemonLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

int Store::schema_version() {
  std::lock_guard lock(mutex_);
  Stmt q(db_, "SELECT COALESCE(MAX(version), 0) FROM schema_version");
  q.step();
  return static_cast<int>(q.integer(0));
}

bool Store::writable() {
  {
    // After a write failed for lack of space or an I/O error, not ready for a while; then the
    // next real write tries again (a probe could succeed in space the WAL already holds).
    const auto failed_at = write_failure_->at_ns.load();
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    if (failed_at != 0) {
      if (now - failed_at < write_failure_->retry_after.load().count()) return false;
      write_failure_->at_ns = 0;
    }
  }
  std::lock_guard lock(mutex_);
  try {
    Transaction tx(db_);
    return true;  // rolled back on scope exit
  } catch (const StoreError&) {
    return false;
  }
}

void Store::set_write_retry_for_test(std::chrono::nanoseconds after) {
  write_failure_->retry_after = after;
}

void Store::limit_pages_for_test(std::int64_t pages) {
  std::lock_guard lock(mutex_);
  exec(fmt::format("PRAGMA max_page_count = {}", pages).c_str());
}

void Store::insert_sweep(const SweepRow& s) {
  std::lock_guard lock(mutex_);
  write([&] { insert_sweep_locked(s); });
}

void Store::insert_sweep_locked(const SweepRow& s) {
  Stmt q(db_,
         "INSERT INTO sweeps (id, name, kind, target_key, status, spec, secret_headers, resumable, "
         "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?)");
  const std::string now = s.created_at.empty() ? utc_now() : s.created_at;
  q.bind(1, s.id).bind(2, s.name).bind(3, s.kind).bind(4, s.target_key).bind(5, s.status);
  q.bind(6, to_text(s.spec)).bind(7, to_text(s.secret_headers)).bind(8, now).bind(9, now);
  q.step();
}

std::optional<SweepRow> Store::sweep(const std::string& id) {
  std::lock_guard lock(mutex_);
  Stmt q(db_, fmt::format("SELECT {} FROM sweeps WHERE id = ?", kSweepColumns));
  q.bind(1, id);
  if (!q.step()) return std::nullopt;
  return sweep_from(q);
}

std::vector<SweepRow> Store::list_sweeps(const std::optional<std::string>& status, int limit, int offset) {
  std::lock_guard lock(mutex_);
  Stmt q(db_, fmt::format("SELECT {} FROM sweeps WHERE (?1 IS NULL OR status = ?1) ORDER BY seq DESC "
                          "LIMIT ?2 OFFSET ?3",
                          kSweepColumns));
  if (status)
    q.bind(1, *status);
  else
    q.bind_null(1);
  q.bind(2, limit).bind(3, offset);
  std::vector<SweepRow> out;
  while (q.step()) out.push_back(sweep_from(q));
  return out;
}

std::map<std::string, std::uint64_t> Store::count_by_status() {
  std::lock_guard lock(mutex_);
  std::map<std::string, std::uint64_t> out{
      {"queued", 0}, {"running", 0}, {"succeeded", 0}, {"failed", 0}, {"cancelled", 0}};
  Stmt q(db_, "SELECT status, COUNT(*) FROM sweeps GROUP BY status");
  while (q.step()) out[q.text(0)] = static_cast<std::uint64_t>(q.integer(1));
  return out;
}

std::uint64_t Store::count_status(const std::string& status) {
  std::lock_guard lock(mutex_);
  Stmt q(db_, "SELECT COUNT(*) FROM sweeps WHERE status = ?");
  q.bind(1, status);
  q.step();
  return static_cast<std::uint64_t>(q.integer(0));
}

bool Store::transition(const std::string& id, const std::string& from, const std::string& to) {
  std::lock_guard lock(mutex_);
  const std::string now = utc_now();
  Stmt q(db_,
         "UPDATE sweeps SET status = ?1, updated_at = ?2, "
         "started_at = CASE WHEN ?1 = 'running' AND started_at IS NULL THEN ?2 ELSE started_at END, "
         "finished_at = CASE WHEN ?4 THEN ?2 ELSE finished_at END "
         "WHERE id = ?3 AND status = ?5");
  q.bind(1, to).bind(2, now).bind(3, id).bind(4, terminal(to)).bind(5, from);
  q.step();
  return sqlite3_changes(db_) == 1;
}

void Store::finish_sweep(const std::string& id, const std::string& status, const json& result,
                         const std::string& error) {
  std::lock_guard lock(mutex_);
  const std::string now = utc_now();
  Stmt q(db_,
         "UPDATE sweeps SET status = ?, result = ?, error = ?, resumable = 0, finished_at = ?, updated_at = ? "
         "WHERE id = ?");
  q.bind(1, status);
  if (result.is_null())
    q.bind_null(2);
  else
    q.bind(2, to_text(result));
  if (error.empty())
    q.bind_null(3);
  else
    q.bind(3, error);
  q.bind(4, now).bind(5, now).bind(6, id);
  write([&] { q.step(); });
}

void Store::set_progress(const std::string& id, const json& progress) {
  std::lock_guard lock(mutex_);
  Stmt q(db_, "UPDATE sweeps SET progress = ?, updated_at = ? WHERE id = ?");
  q.bind(1, to_text(progress)).bind(2, utc_now()).bind(3, id);
  write([&] { q.step(); });
}

void Store::set_resumable(const std::string& id, bool resumable) {
  std::lock_guard lock(mutex_);
  Stmt q(db_, "UPDATE sweeps SET resumable = ?, updated_at = ? WHERE id = ?");
  q.bind(1, resumable).bind(2, utc_now()).bind(3, id);
  write([&] { q.step(); });
}

int Store::begin_step_attempt(const std::string& id, int step_index) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  Stmt u(db_,
         "UPDATE sweeps SET attempts = CASE WHEN attempt_step = ?1 THEN attempts + 1 ELSE 1 END, "
         "attempt_step = ?1 WHERE id = ?2");
  u.bind(1, step_index).bind(2, id);
  u.step();
  Stmt q(db_, "SELECT attempts FROM sweeps WHERE id = ?");
  q.bind(1, id);
  const int n = q.step() ? static_cast<int>(q.integer(0)) : 0;
  tx.commit();
  return n;
}

void Store::end_step_attempt(const std::string& id) {
  std::lock_guard lock(mutex_);
  Stmt u(db_, "UPDATE sweeps SET attempts = 0, attempt_step = NULL WHERE id = ?");
  u.bind(1, id);
  u.step();
}

std::uint64_t Store::prune_finished(double max_age_s, std::uint64_t max_sweeps) {
  std::lock_guard lock(mutex_);
  std::uint64_t removed = 0;
  Transaction tx(db_);
  if (max_age_s > 0) {
    const auto cutoff =
        std::chrono::system_clock::now() -
        std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(max_age_s));
    // Stored times are utc_now() text, which sorts as it reads: compare as text.
    const std::string cut = format_utc(cutoff);
    Stmt d(db_, "DELETE FROM sweeps WHERE status IN ('succeeded', 'failed', 'cancelled') AND finished_at < ?");
    d.bind(1, cut);
    d.step();
    removed += static_cast<std::uint64_t>(sqlite3_changes(db_));
  }
  if (max_sweeps > 0) {
    Stmt d(db_,
           "DELETE FROM sweeps WHERE status IN ('succeeded', 'failed', 'cancelled') AND seq NOT IN "
           "(SELECT seq FROM sweeps WHERE status IN ('succeeded', 'failed', 'cancelled') ORDER BY seq DESC LIMIT ?)");
    d.bind(1, max_sweeps);
    d.step();
    removed += static_cast<std::uint64_t>(sqlite3_changes(db_));
  }
  tx.commit();
  return removed;
}

bool Store::delete_sweep(const std::string& id) {
  std::lock_guard lock(mutex_);
  Transaction tx(db_);
  Stmt d(db_, "DELETE FROM sweeps WHERE id = ? AND status <> 'running'");
  d.bind(1, id);
  d.step();
  const bool deleted = sqlite3_changes(db_) == 1;
  tx.commit();
  return deleted;
}

}  // namespace capsweep::store
