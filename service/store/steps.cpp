// The steps of a job and their per-request rows: written in one transaction per step, read
// back whole (steps) or in keyset pages (requests).

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <memory>

#include "store/sqlite.hpp"
#include "store/store.hpp"

namespace capsweep::store {

using namespace detail;

namespace {

// A request row from a query selecting step_index, request_index, scheduled_ms ... outcome.
RequestRow request_from(const Stmt& q) {
  RequestRow r;
  r.index = static_cast<std::uint64_t>(q.integer(1));
  r.scheduled_ms = q.real(2).value_or(0);
  r.dispatched_ms = q.real(3);
  r.sent_ms = q.real(4);
  r.finished_ms = q.real(5);
  r.ttft_ms = q.real(6);
  r.e2el_ms = q.real(7);
  r.input_tokens = static_cast<std::uint32_t>(q.integer(8));
  r.output_tokens = static_cast<std::uint32_t>(q.integer(9));
  r.chunks = static_cast<std::uint32_t>(q.integer(10));
  r.outcome = q.text(11);
  r.itl_ms = q.text(12);
  if (!q.is_null(13)) r.turn = static_cast<std::uint32_t>(q.integer(13));
  return r;
}

constexpr const char* kRequestColumns =
    "step_index, request_index, scheduled_ms, dispatched_ms, sent_ms, finished_ms, ttft_ms, e2el_ms, input_tokens, "
    "output_tokens, chunks, outcome, itl_ms, turn";

}  // namespace

std::vector<StepRow> Store::steps(const std::string& sweep_id) {
  std::lock_guard lock(mutex_);
  Stmt q(db_,
         "SELECT s.step_index, s.kind, s.phase, s.offered_rate_rps, s.verdict, s.generator_limited, "
         "s.summary, s.evaluation, s.outcome, m.summary, s.started_at, s.finished_at, s.role, s.round FROM steps s "
         "LEFT JOIN step_server_metrics m ON m.sweep_id = s.sweep_id AND m.step_index = s.step_index "
         "WHERE s.sweep_id = ? ORDER BY s.step_index");
  q.bind(1, sweep_id);
  std::vector<StepRow> out;
  while (q.step()) {
    StepRow r;
    r.index = static_cast<int>(q.integer(0));
    r.kind = q.text(1);
    r.phase = q.text(2);
    r.offered_rate_rps = q.real(3);
    r.verdict = q.text(4);
    r.generator_limited = q.integer(5) != 0;
    r.summary = q.json_at(6);
    r.evaluation = q.json_at(7);
    r.outcome = q.json_at(8);
    r.server = q.json_at(9);
    r.started_at = q.text(10);
    r.finished_at = q.text(11);
    r.role = q.text(12);
    if (!q.is_null(13)) r.round = static_cast<int>(q.integer(13));
    out.push_back(std::move(r));
  }
  return out;
}

void Store::append_step(const std::string& sweep_id, const StepRow& step, const std::vector<RequestRow>& requests,
                        const std::vector<QualityItemRow>& items) {
  std::lock_guard lock(mutex_);
  write([&] { append_step_locked(sweep_id, step, requests, items); });
}

void Store::append_step_locked(const std::string& sweep_id, const StepRow& step,
                               const std::vector<RequestRow>& requests, const std::vector<QualityItemRow>& items) {
  Transaction tx(db_);
  {
    Stmt n(db_, "SELECT COUNT(*) FROM steps WHERE sweep_id = ?");
    n.bind(1, sweep_id);
    n.step();
    if (n.integer(0) != step.index) {
      throw StoreError(
          fmt::format("step {} of sweep {} is out of order ({} stored)", step.index, sweep_id, n.integer(0)));
    }
  }
  Stmt s(db_,
         "INSERT INTO steps (sweep_id, step_index, kind, phase, offered_rate_rps, verdict, generator_limited, "
         "summary, evaluation, outcome, started_at, finished_at, role, round) "
         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, sweep_id).bind(2, step.index).bind(3, step.kind).bind(4, step.phase).bind(5, step.offered_rate_rps);
  s.bind(6, step.verdict)
      .bind(7, step.generator_limited)
      .bind(8, to_text(step.summary))
      .bind(9, to_text(step.evaluation));
  s.bind(10, to_text(step.outcome)).bind(11, step.started_at).bind(12, step.finished_at);
  if (step.role.empty())
    s.bind_null(13);
  else
    s.bind(13, step.role);
  if (step.round)
    s.bind(14, *step.round);
  else
    s.bind_null(14);
  s.step();
  insert_requests(sweep_id, step.index, requests);
  insert_quality_items(sweep_id, step.index, items);
  if (!step.server.is_null()) {
    Stmt m(db_, "INSERT INTO step_server_metrics (sweep_id, step_index, summary) VALUES (?, ?, ?)");
    m.bind(1, sweep_id).bind(2, step.index).bind(3, to_text(step.server));
    m.step();
  }
  Stmt u(db_, "UPDATE sweeps SET updated_at = ? WHERE id = ?");
  u.bind(1, utc_now()).bind(2, sweep_id);
  u.step();
  tx.commit();
}

std::vector<std::pair<int, RequestRow>> Store::requests_page(const std::string& sweep_id,
                                                             std::optional<RequestKey> after, std::size_t limit) {
  std::lock_guard lock(mutex_);
  Stmt q(db_, fmt::format("SELECT {} FROM requests WHERE sweep_id = ?1 AND (step_index, request_index) > (?2, ?3) "
                          "ORDER BY step_index, request_index LIMIT ?4",
                          kRequestColumns));
  q.bind(1, sweep_id)
      .bind(2, after ? after->step : -1)
      .bind(3, after ? static_cast<std::int64_t>(after->request) : std::int64_t{-1});
  q.bind(4, static_cast<std::int64_t>(limit));
  std::vector<std::pair<int, RequestRow>> out;
  out.reserve(limit);
  while (q.step()) out.emplace_back(static_cast<int>(q.integer(0)), request_from(q));
  return out;
}

std::vector<RequestRow> Store::step_requests(const std::string& sweep_id, int step, std::size_t limit) {
  std::lock_guard lock(mutex_);
  Stmt q(db_, fmt::format("SELECT {} FROM requests WHERE sweep_id = ?1 AND step_index = ?2 ORDER BY request_index "
                          "LIMIT ?3",
                          kRequestColumns));
  q.bind(1, sweep_id).bind(2, step).bind(3, static_cast<std::int64_t>(limit));
  std::vector<RequestRow> out;
  while (q.step()) out.push_back(request_from(q));
  return out;
}

// A step's request rows in batches of kBatch rows per INSERT (one statement prepared for the
// full batches, one for the rest): far fewer statement executions than a row at a time.
void Store::insert_requests(const std::string& sweep_id, int step_index, const std::vector<RequestRow>& requests) {
  constexpr std::size_t kBatch = 64;  // 15 columns x 64 rows stays under SQLite's variable limit
  constexpr int kColumns = 15;
  auto statement = [&](std::size_t rows) {
    std::string sql =
        "INSERT INTO requests (sweep_id, step_index, request_index, scheduled_ms, dispatched_ms, sent_ms, "
        "finished_ms, ttft_ms, e2el_ms, input_tokens, output_tokens, chunks, outcome, itl_ms, turn) VALUES ";
    for (std::size_t i = 0; i < rows; ++i)
      sql += i ? ", (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)" : "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
    return std::make_unique<Stmt>(db_, sql);
  };
  std::unique_ptr<Stmt> full;
  for (std::size_t start = 0; start < requests.size(); start += kBatch) {
    const std::size_t rows = std::min(kBatch, requests.size() - start);
    std::unique_ptr<Stmt> rest;
    Stmt& r = rows == kBatch ? (full ? *full : *(full = statement(kBatch))) : *(rest = statement(rows));
    r.reset();
    for (std::size_t i = 0; i < rows; ++i) {
      const RequestRow& q = requests[start + i];
      const int b = static_cast<int>(i) * kColumns;
      r.bind(b + 1, sweep_id)
          .bind(b + 2, step_index)
          .bind(b + 3, q.index)
          .bind(b + 4, std::optional<double>(q.scheduled_ms));
      r.bind(b + 5, q.dispatched_ms).bind(b + 6, q.sent_ms).bind(b + 7, q.finished_ms).bind(b + 8, q.ttft_ms);
      r.bind(b + 9, q.e2el_ms).bind(b + 10, q.input_tokens).bind(b + 11, q.output_tokens).bind(b + 12, q.chunks);
      r.bind(b + 13, q.outcome);
      if (q.itl_ms.empty())
        r.bind_null(b + 14);
      else
        r.bind(b + 14, q.itl_ms);
      if (q.turn == 0)
        r.bind_null(b + 15);
      else
        r.bind(b + 15, q.turn);
    }
    r.step();
  }
}

void Store::insert_quality_items(const std::string& sweep_id, int step_index,
                                 const std::vector<QualityItemRow>& items) {
  Stmt q(db_,
         "INSERT INTO quality_items (sweep_id, step_index, item_index, entry_index, outcome, finish_reason, "
         "completion_tokens, max_tokens, answer, tool_calls, verdicts, score) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
         "?)");
  for (const QualityItemRow& it : items) {
    q.reset();
    q.bind(1, sweep_id).bind(2, step_index).bind(3, it.item).bind(4, it.entry).bind(5, it.outcome);
    q.bind(6, it.finish_reason);
    if (it.completion_tokens)
      q.bind(7, *it.completion_tokens);
    else
      q.bind_null(7);
    q.bind(8, it.max_tokens).bind(9, it.answer).bind(10, to_text(it.tool_calls)).bind(11, to_text(it.verdicts));
    q.bind(12, it.score);
    q.step();
  }
}

std::vector<std::pair<int, QualityItemRow>> Store::quality_page(const std::string& sweep_id,
                                                                std::optional<ItemKey> after, std::size_t limit) {
  std::lock_guard lock(mutex_);
  Stmt q(db_,
         "SELECT step_index, item_index, entry_index, outcome, finish_reason, completion_tokens, max_tokens, answer, "
         "tool_calls, verdicts, score FROM quality_items WHERE sweep_id = ?1 AND (step_index, item_index) > (?2, ?3) "
         "ORDER BY step_index, item_index LIMIT ?4");
  q.bind(1, sweep_id).bind(2, after ? after->step : -1).bind(3, after ? after->item : -1);
  q.bind(4, static_cast<std::int64_t>(limit));
  std::vector<std::pair<int, QualityItemRow>> out;
  while (q.step()) {
    QualityItemRow r;
    r.item = static_cast<int>(q.integer(1));
    r.entry = static_cast<std::uint64_t>(q.integer(2));
    r.outcome = q.text(3);
    r.finish_reason = q.text(4);
    if (!q.is_null(5)) r.completion_tokens = static_cast<std::uint64_t>(q.integer(5));
    r.max_tokens = static_cast<std::uint32_t>(q.integer(6));
    r.answer = q.text(7);
    r.tool_calls = q.json_at(8);
    r.verdicts = q.json_at(9);
    r.score = q.real(10);
    out.emplace_back(static_cast<int>(q.integer(0)), std::move(r));
  }
  return out;
}

}  // namespace capsweep::store
