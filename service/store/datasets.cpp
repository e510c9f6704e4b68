// The datasets table: uploads stored once per content, and the jobs that name them.

#include <fmt/format.h>
#include <sqlite3.h>

#include "store/sqlite.hpp"
#include "store/store.hpp"

namespace capsweep::store {

using namespace detail;

namespace {

constexpr const char* kDatasetColumns = "id, name, format, sha256, bytes, items, stats, created_at";

DatasetRow dataset_from(const Stmt& s) {
  DatasetRow d;
  d.id = s.text(0);
  d.name = s.text(1);
  d.format = s.text(2);
  d.sha256 = s.text(3);
  d.bytes = static_cast<std::uint64_t>(s.integer(4));
  d.items = static_cast<std::uint64_t>(s.integer(5));
  d.stats = s.json_at(6);
  d.created_at = s.text(7);
  return d;
}

}  // namespace

std::pair<DatasetRow, bool> Store::insert_dataset(const DatasetRow& d, std::string_view content) {
  std::lock_guard lock(mutex_);
  std::optional<DatasetRow> existing;
  DatasetRow out = d;
  if (out.created_at.empty()) out.created_at = utc_now();
  write([&] {
    Transaction tx(db_);
    Stmt q(db_, fmt::format("SELECT {} FROM datasets WHERE sha256 = ?", kDatasetColumns));
    q.bind(1, d.sha256);
    if (q.step()) {
      existing = dataset_from(q);
      return;
    }
    Stmt ins(db_,
             "INSERT INTO datasets (id, name, format, sha256, bytes, items, stats, content, created_at) "
             "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
    ins.bind(1, d.id).bind(2, d.name).bind(3, d.format).bind(4, d.sha256).bind(5, d.bytes).bind(6, d.items);
    ins.bind(7, d.stats.dump()).bind_blob_static(8, content).bind(9, out.created_at);
    ins.step();
    tx.commit();
  });
  if (existing) return {*existing, false};
  return {out, true};
}

std::optional<DatasetRow> Store::dataset(const std::string& id) {
  std::lock_guard lock(mutex_);
  Stmt q(db_, fmt::format("SELECT {} FROM datasets WHERE id = ?", kDatasetColumns));
  q.bind(1, id);
  if (!q.step()) return std::nullopt;
  return dataset_from(q);
}

std::optional<std::string> Store::dataset_content(const std::string& id) {
  std::lock_guard lock(mutex_);
  Stmt q(db_, "SELECT content FROM datasets WHERE id = ?");
  q.bind(1, id);
  if (!q.step()) return std::nullopt;
  return q.blob(0);
}

std::vector<DatasetRow> Store::list_datasets(int limit, int offset) {
  std::lock_guard lock(mutex_);
  Stmt q(db_, fmt::format("SELECT {} FROM datasets ORDER BY created_at DESC, id LIMIT ? OFFSET ?", kDatasetColumns));
  q.bind(1, limit).bind(2, offset);
  std::vector<DatasetRow> out;
  while (q.step()) out.push_back(dataset_from(q));
  return out;
}

namespace {

std::vector<std::string> jobs_using(sqlite3* db, const std::string& id) {
  Stmt q(db,
         "SELECT id FROM sweeps WHERE status IN ('queued', 'running') "
         "AND (json_extract(spec, '$.workload.dataset.id') = ?1 OR json_extract(spec, '$.quality.dataset.id') = ?1) "
         "ORDER BY seq");
  q.bind(1, id);
  std::vector<std::string> out;
  while (q.step()) out.push_back(q.text(0));
  return out;
}

}  // namespace

std::vector<std::string> Store::jobs_using_dataset(const std::string& id) {
  std::lock_guard lock(mutex_);
  return jobs_using(db_, id);
}

Store::DeleteDataset Store::delete_dataset(const std::string& id) {
  std::lock_guard lock(mutex_);
  DeleteDataset out = DeleteDataset::absent;
  write([&] {
    Transaction tx(db_);
    if (!jobs_using(db_, id).empty()) {
      out = DeleteDataset::in_use;
      return;
    }
    Stmt d(db_, "DELETE FROM datasets WHERE id = ?");
    d.bind(1, id);
    d.step();
    out = sqlite3_changes(db_) == 1 ? DeleteDataset::deleted : DeleteDataset::absent;
    tx.commit();
  });
  return out;
}

}  // namespace capsweep::store
