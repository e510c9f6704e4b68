#pragma once
// A table of named rows, grown at start-up and read everywhere: the job kinds, the arrival
// processes and the target APIs are each one. Rows are never removed or moved (a deque), so a
// reference to one stays valid; a shared lock guards the table's growth. A row's index is its
// value (at most 256 rows: the values are bytes).

#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace capsweep {

template <class Row>
class RowTable {
 public:
  // `what` names a row in errors ("job kind", "arrival process"); `first` are the rows the
  // table starts with, in their values' order.
  RowTable(std::string what, std::vector<Row> first) : what_(std::move(what)) {
    for (auto& r : first) rows_.push_back(std::move(r));
  }

  // The row at `i`; `fallback`'s for an index no row has.
  const Row& at(std::size_t i, std::size_t fallback = 0) const noexcept {
    std::shared_lock lock(m_);
    return rows_[i < rows_.size() ? i : fallback];
  }
  bool has(std::size_t i) const noexcept {
    std::shared_lock lock(m_);
    return i < rows_.size();
  }
  std::size_t size() const noexcept {
    std::shared_lock lock(m_);
    return rows_.size();
  }

  // Adds a row; its index. Throws std::invalid_argument for a name taken or a full table.
  std::size_t add(Row row) {
    std::unique_lock lock(m_);
    for (const auto& r : rows_) {
      if (r.name == row.name) throw std::invalid_argument(what_ + " \"" + row.name + "\" is registered already");
    }
    if (rows_.size() > 255) throw std::invalid_argument("the " + what_ + " table is full");
    rows_.push_back(std::move(row));
    return rows_.size() - 1;
  }

  std::optional<std::size_t> find(std::string_view name) const noexcept {
    std::shared_lock lock(m_);
    for (std::size_t i = 0; i < rows_.size(); ++i) {
      if (rows_[i].name == name) return i;
    }
    return std::nullopt;
  }

  // Every row's name, in the table's order.
  std::vector<std::string> names() const {
    std::shared_lock lock(m_);
    std::vector<std::string> out;
    for (const auto& r : rows_) out.push_back(r.name);
    return out;
  }

 private:
  std::string what_;
  mutable std::shared_mutex m_;
  std::deque<Row> rows_;
};

}  // namespace capsweep
