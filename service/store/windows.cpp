// A scenario job's windows: one row each, written as the window closes.

#include <fmt/format.h>
#include <sqlite3.h>

#include "store/sqlite.hpp"
#include "store/store.hpp"

namespace capsweep::store {

using namespace detail;

void Store::append_window(const std::string& sweep_id, int index, double t_start_s, const json& row) {
  std::lock_guard lock(mutex_);
  write([&] {
    Stmt q(db_, "INSERT OR REPLACE INTO scenario_windows (sweep_id, window_index, t_start_s, row) VALUES (?, ?, ?, ?)");
    q.bind(1, sweep_id).bind(2, index).bind(3, std::optional<double>(t_start_s)).bind(4, to_text(row));
    q.step();
  });
}

std::vector<json> Store::windows(const std::string& sweep_id) {
  std::lock_guard lock(mutex_);
  Stmt q(db_, "SELECT row FROM scenario_windows WHERE sweep_id = ? ORDER BY window_index");
  q.bind(1, sweep_id);
  std::vector<json> out;
  while (q.step()) out.push_back(q.json_at(0));
  return out;
}

void Store::clear_windows(const std::string& sweep_id) {
  std::lock_guard lock(mutex_);
  write([&] {
    Stmt q(db_, "DELETE FROM scenario_windows WHERE sweep_id = ?");
    q.bind(1, sweep_id);
    q.step();
  });
}

}  // namespace capsweep::store
