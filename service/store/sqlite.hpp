#pragma once
// Internal to store/: the SQLite statement and transaction wrappers every store file uses, the
// JSON text form of stored columns, and the write wrapper that remembers a full disk.

#include <fmt/format.h>
#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "store/store.hpp"

namespace capsweep::store::detail {

using json = nlohmann::json;

// A prepared statement, finalised on scope exit; bind by 1-based position.
class Stmt {
 public:
  Stmt(sqlite3* db, std::string_view sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &st_, nullptr) != SQLITE_OK) {
      throw StoreError(fmt::format("prepare failed: {} ({})", sqlite3_errmsg(db), sql));
    }
  }
  ~Stmt() { sqlite3_finalize(st_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, std::string_view v) {
    check(sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  Stmt& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  Stmt& bind(int i, std::int64_t v) {
    check(sqlite3_bind_int64(st_, i, v));
    return *this;
  }
  Stmt& bind(int i, int v) { return bind(i, static_cast<std::int64_t>(v)); }
  Stmt& bind(int i, std::uint64_t v) { return bind(i, static_cast<std::int64_t>(v)); }
  Stmt& bind(int i, std::uint32_t v) { return bind(i, static_cast<std::int64_t>(v)); }
  Stmt& bind(int i, bool v) { return bind(i, static_cast<std::int64_t>(v ? 1 : 0)); }
  Stmt& bind(int i, std::optional<double> v) {
    check(v && std::isfinite(*v) ? sqlite3_bind_double(st_, i, *v) : sqlite3_bind_null(st_, i));
    return *this;
  }
  // Binds bytes without copying them: they must outlive the statement's step().
  Stmt& bind_blob_static(int i, std::string_view v) {
    check(sqlite3_bind_blob64(st_, i, v.data(), v.size(), SQLITE_STATIC));
    return *this;
  }
  Stmt& bind_null(int i) {
    check(sqlite3_bind_null(st_, i));
    return *this;
  }

  // true while a row is available.
  bool step() {
    const int rc = sqlite3_step(st_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw StoreError(fmt::format("sqlite: {}", sqlite3_errmsg(db_)), rc & 0xff);
  }
  void reset() {
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
  }

  std::string text(int col) const {
    const auto* p = sqlite3_column_text(st_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(st_, col)))
             : std::string();
  }
  bool is_null(int col) const { return sqlite3_column_type(st_, col) == SQLITE_NULL; }
  std::int64_t integer(int col) const { return sqlite3_column_int64(st_, col); }
  std::optional<double> real(int col) const {
    if (is_null(col)) return std::nullopt;
    return sqlite3_column_double(st_, col);
  }
  std::string blob(int col) const {
    const auto* p = static_cast<const char*>(sqlite3_column_blob(st_, col));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(st_, col))) : std::string();
  }
  json json_at(int col) const { return is_null(col) ? json(nullptr) : json::parse(text(col)); }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) throw StoreError(fmt::format("bind failed: {}", sqlite3_errmsg(db_)));
  }
  sqlite3* db_;
  sqlite3_stmt* st_ = nullptr;
};

// Rolls back unless committed.
class Transaction {
 public:
  Transaction(sqlite3* db) : db_(db) { run("BEGIN IMMEDIATE"); }
  ~Transaction() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    run("COMMIT");
    done_ = true;
  }

 private:
  void run(const char* sql) {
    char* err = nullptr;
    if (const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err); rc != SQLITE_OK) {
      std::string msg = err ? err : "unknown";
      sqlite3_free(err);
      throw StoreError(fmt::format("{}: {}", sql, msg), rc & 0xff);
    }
  }
  sqlite3* db_;
  bool done_ = false;
};

// JSON as stored: text a target sent (error messages, labels) may hold invalid UTF-8, which
// is replaced rather than allowed to fail the write.
inline std::string to_text(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace capsweep::store::detail

namespace capsweep::store {

template <class F>
void Store::write(F&& f) {
  try {
    f();
    write_failure_->at_ns = 0;
  } catch (const StoreError& e) {
    const int code = e.sqlite_code();
    if (code == SQLITE_FULL || code == SQLITE_IOERR || code == SQLITE_CANTOPEN || code == SQLITE_READONLY) {
      write_failure_->at_ns = std::chrono::steady_clock::now().time_since_epoch().count();
    }
    throw;
  }
}

}  // namespace capsweep::store
