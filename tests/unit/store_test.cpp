// The SQLite store on a real temporary file: migrations, sweeps, one-transaction steps.
#include "store/store.hpp"

#include <fmt/format.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>

#include "support/temp_db.hpp"

using namespace capsweep::store;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace capsweep::store {
// The migrations compiled in (store.cpp).
std::vector<std::pair<std::string_view, std::string_view>> migrations();
}  // namespace capsweep::store

namespace {

using TempDb = capsweep::testing::TempDb;

// Every stored request of a sweep, read page by page as requests.csv does.
std::vector<std::pair<int, RequestRow>> all_requests(Store& s, const std::string& id, std::size_t page = 1000) {
  std::vector<std::pair<int, RequestRow>> out;
  std::optional<Store::RequestKey> after;
  for (;;) {
    auto rows = s.requests_page(id, after, page);
    out.insert(out.end(), rows.begin(), rows.end());
    if (rows.size() < page) return out;
    after = Store::RequestKey{rows.back().first, rows.back().second.index};
  }
}

SweepRow sweep_row(const std::string& id, const std::string& target = "http://127.0.0.1:8000") {
  SweepRow r;
  r.id = id;
  r.name = "n-" + id;
  r.target_key = target;
  r.spec = {{"target", {{"base_url", target}}}};
  r.secret_headers = {{"Authorization", "Bearer x"}};
  return r;
}

StepRow step_row(int index) {
  StepRow s;
  s.index = index;
  s.kind = "ladder";
  s.phase = "ladder";
  s.offered_rate_rps = 2.5 * (index + 1);
  s.verdict = "pass";
  s.summary = {{"p95_ttft_ms", 10.0 * index}};
  s.outcome = {{"kind", "ladder"}};
  s.server = {{"mean_running", 3.0}};
  s.started_at = s.finished_at = utc_now();
  return s;
}

std::vector<RequestRow> requests(int n) {
  std::vector<RequestRow> out;
  for (int i = 0; i < n; ++i) {
    RequestRow r;
    r.index = static_cast<std::uint64_t>(i);
    r.scheduled_ms = i * 10.0;
    r.sent_ms = i * 10.0 + 0.5;
    r.ttft_ms = 20;
    r.outcome = i == n - 1 ? "incomplete" : "ok";
    if (i % 2 == 0) r.itl_ms = fmt::format("{}.5 {}.25", i, i + 1);
    if (i % 3 == 1) r.turn = static_cast<std::uint32_t>(i + 1);  // some rows a session's turn
    out.push_back(r);
  }
  return out;
}

}  // namespace

TEST_CASE("store: migrations apply once and the version is recorded - WAL is on") {
  TempDb db;
  {
    Store s(db.path.string());
    CHECK(s.schema_version() == 10);
    s.insert_sweep(sweep_row("a"));
    CHECK(fs::exists(db.path.string() + "-wal"));
  }
  Store again(db.path.string());  // reopening applies nothing twice and keeps the data
  CHECK(again.schema_version() == 10);
  CHECK(again.sweep("a").has_value());
  CHECK(again.writable());
}

TEST_CASE("store: a job's kind is any name of the kinds table (version 8), never an empty one") {
  TempDb db;
  Store s(db.path.string());
  SweepRow row = sweep_row("fifth");
  row.kind = "twice";  // a kind registered beside the four
  s.insert_sweep(row);
  REQUIRE(s.sweep("fifth").has_value());
  CHECK(s.sweep("fifth")->kind == "twice");
  SweepRow nameless = sweep_row("nameless");
  nameless.kind = "";
  CHECK_THROWS_AS(s.insert_sweep(nameless), StoreError);
  CHECK_FALSE(s.sweep("nameless").has_value());
}

TEST_CASE("store: the table rebuilds (versions 4, 6 and 8) keep every sweep, step and request row") {
  TempDb db;
  // A version 3 database full of rows, as an upgrade would find it.
  {
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open(db.path.string().c_str(), &raw) == SQLITE_OK);
    auto exec = [raw](const std::string& sql) {
      char* err = nullptr;
      const int rc = sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, &err);
      INFO((err ? err : ""));
      sqlite3_free(err);
      REQUIRE(rc == SQLITE_OK);
    };
    exec("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)");
    auto files = capsweep::store::migrations();
    std::sort(files.begin(), files.end());
    for (const auto& [name, sql] : files) {
      if (name.substr(0, 3) > "003") break;
      exec(std::string(sql));
      exec("INSERT INTO schema_version VALUES (" + std::to_string(std::stoi(std::string(name.substr(0, 3)))) + ", '" +
           std::string(name) + "', 'now')");
    }
    exec(
        "INSERT INTO sweeps (id, kind, target_key, status, spec, created_at, updated_at, attempts) VALUES "
        "('a', 'sweep', 'http://t', 'succeeded', '{}', 'c', 'u', 0), ('b', 'check', 'http://u', 'queued', '{}', 'c', "
        "'u', 0)");
    for (int step = 0; step < 2; ++step) {
      exec(
          fmt::format("INSERT INTO steps VALUES ('a', {}, 'ladder', 'ladder', 1.5, 'pass', 0, '{{}}', '{{}}', "
                      "'{{\"kind\": \"ladder\"}}', 's', 'f')",
                      step));
      for (int r = 0; r < 4; ++r) {
        exec(fmt::format("INSERT INTO requests VALUES ('a', {}, {}, 0, 0, 0, 1, 1, 1, 10, 10, 1, 'ok')", step, r));
      }
    }
    sqlite3_close(raw);
  }
  Store s(db.path.string());
  CHECK(s.schema_version() == 10);
  CHECK(s.list_sweeps(std::nullopt, 10, 0).size() == 2);
  CHECK(s.list_sweeps(std::nullopt, 10, 0)[0].id == "b");  // creation order kept
  auto steps = s.steps("a");
  REQUIRE(steps.size() == 2);
  CHECK(steps[1].kind == "ladder");
  CHECK(steps[1].role.empty());
  CHECK_FALSE(steps[1].round.has_value());
  CHECK(all_requests(s, "a").size() == 8);
  // What version 6 admits: regression jobs, their runs with role and round, quality items.
  SweepRow r = sweep_row("r");
  r.kind = "regression";
  s.insert_sweep(r);
  StepRow run = step_row(0);
  run.kind = "run";
  run.role = "candidate";
  run.round = 2;
  s.append_step("r", run, requests(2));
  StepRow quality = step_row(1);
  quality.kind = "quality";
  quality.role = "baseline";
  quality.round = 0;
  QualityItemRow item;
  item.item = 0;
  item.entry = 3;
  item.outcome = "ok";
  item.answer = "{\"a\": 1}";
  item.verdicts = {{"json", {{"ok", true}, {"reason", ""}}}};
  item.score = 7;
  s.append_step("r", quality, {}, {item});
  const auto back = s.steps("r");
  REQUIRE(back.size() == 2);
  CHECK(back[0].role == "candidate");
  CHECK(back[0].round == 2);
  const auto items = s.quality_page("r", std::nullopt, 10);
  REQUIRE(items.size() == 1);
  CHECK(items[0].first == 1);
  CHECK(items[0].second.entry == 3);
  CHECK(items[0].second.verdicts["json"]["ok"] == true);
  CHECK(items[0].second.score == 7);
  CHECK(s.quality_page("r", Store::ItemKey{1, 0}, 10).empty());
  StepRow bogus = step_row(2);
  bogus.kind = "bogus";
  CHECK_THROWS_AS(s.append_step("r", bogus, requests(1)), StoreError);  // the CHECK still holds
  StepRow bad_role = step_row(2);
  bad_role.role = "third";
  CHECK_THROWS_AS(s.append_step("r", bad_role, requests(1)), StoreError);
  // Deleting the job takes its steps, requests and items with it.
  CHECK(s.delete_sweep("r"));
  CHECK(s.quality_page("r", std::nullopt, 10).empty());
}

TEST_CASE("store: sweeps list newest first, filter by status, and move by compare-and-set") {
  TempDb db;
  Store s(db.path.string());
  s.insert_sweep(sweep_row("a"));
  s.insert_sweep(sweep_row("b"));
  s.insert_sweep(sweep_row("c"));
  auto all = s.list_sweeps(std::nullopt, 10, 0);
  REQUIRE(all.size() == 3);
  CHECK(all[0].id == "c");
  CHECK(all[2].id == "a");
  CHECK(s.list_sweeps(std::nullopt, 1, 1)[0].id == "b");
  CHECK(all[0].secret_headers["Authorization"] == "Bearer x");

  CHECK(s.transition("b", "queued", "running"));
  CHECK_FALSE(s.transition("b", "queued", "running"));  // already moved
  CHECK_FALSE(s.transition("zzz", "queued", "running"));
  auto b = s.sweep("b").value();
  CHECK(b.status == "running");
  CHECK_FALSE(b.started_at.empty());
  CHECK(s.list_sweeps(std::string("running"), 10, 0).size() == 1);
  CHECK(s.count_status("queued") == 2);
  CHECK(s.count_by_status()["running"] == 1);
  CHECK(s.count_by_status()["failed"] == 0);

  s.finish_sweep("b", "succeeded", json{{"max_slo_rate_rps", 9.5}}, "");
  b = s.sweep("b").value();
  CHECK(b.status == "succeeded");
  CHECK(b.result["max_slo_rate_rps"] == 9.5);
  CHECK_FALSE(b.finished_at.empty());
  s.set_progress("a", {{"phase", "ladder"}});
  CHECK(s.sweep("a")->progress["phase"] == "ladder");
  s.set_resumable("a", true);
  CHECK(s.sweep("a")->resumable);
}

TEST_CASE("store: a step and its requests are written together, in order, or not at all") {
  TempDb db;
  Store s(db.path.string());
  s.insert_sweep(sweep_row("a"));
  s.append_step("a", step_row(0), requests(5));
  s.append_step("a", step_row(1), requests(3));
  // Out of order (a duplicate index, or a gap): refused, nothing written.
  CHECK_THROWS_AS(s.append_step("a", step_row(1), requests(4)), StoreError);
  CHECK_THROWS_AS(s.append_step("a", step_row(5), requests(4)), StoreError);
  auto steps = s.steps("a");
  REQUIRE(steps.size() == 2);
  CHECK(steps[1].offered_rate_rps == 5.0);
  CHECK(steps[1].summary["p95_ttft_ms"] == 10.0);
  CHECK(steps[0].server["mean_running"] == 3.0);
  int rows = 0, incomplete = 0;
  for (const auto& [step, r] : all_requests(s, "a")) {
    ++rows;
    incomplete += r.outcome == "incomplete";
    CHECK(step >= 0);
    CHECK_FALSE(r.finished_ms.has_value());
    CHECK(r.sent_ms.has_value());
  }
  CHECK(rows == 8);
  CHECK(incomplete == 2);
  // Each request's ITL list comes back as written; one step's requests alone, in order.
  const auto one = s.step_requests("a", 1, 100);
  REQUIRE(one.size() == 3);
  CHECK(one[0].itl_ms == "0.5 1.25");
  CHECK(one[1].itl_ms.empty());
  CHECK(one[2].itl_ms == "2.5 3.25");
  // A session's turn comes back as written (version 10); a request of no session has none.
  CHECK(one[0].turn == 0);
  CHECK(one[1].turn == 2);
  CHECK(one[2].turn == 0);
  CHECK(s.step_requests("a", 1, 2).size() == 2);
  CHECK(s.step_requests("a", 9, 100).empty());
  // A step with no server summary stores none.
  StepRow bare = step_row(2);
  bare.server = nullptr;
  s.append_step("a", bare, {});
  CHECK(s.steps("a")[2].server.is_null());
}

TEST_CASE("store: a running sweep cannot be deleted - others go with their steps") {
  TempDb db;
  Store s(db.path.string());
  s.insert_sweep(sweep_row("a"));
  s.append_step("a", step_row(0), requests(2));
  REQUIRE(s.transition("a", "queued", "running"));
  CHECK_FALSE(s.delete_sweep("a"));
  CHECK(s.sweep("a").has_value());
  s.finish_sweep("a", "failed", nullptr, "boom");
  CHECK(s.sweep("a")->error == "boom");
  CHECK(s.delete_sweep("a"));
  CHECK_FALSE(s.sweep("a").has_value());
  CHECK(s.steps("a").empty());
  CHECK(all_requests(s, "a").empty());
  CHECK_FALSE(s.delete_sweep("a"));
}

TEST_CASE("store: a path that cannot be opened throws") {
  CHECK_THROWS_AS(Store("/nonexistent-dir/for/sure/x.db"), StoreError);
}

TEST_CASE("store: the database and its WAL are readable by their owner only") {
  TempDb db;
  {
    // A file left group/world-readable by an older version is tightened too.
    std::FILE* f = std::fopen(db.path.c_str(), "w");
    REQUIRE(f);
    std::fclose(f);
    fs::permissions(db.path,
                    fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  }
  Store s(db.path.string());
  s.insert_sweep(sweep_row("a"));
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const auto p = fs::status(db.path.string() + suffix).permissions();
    INFO(suffix);
    CHECK((p & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
    CHECK((p & fs::perms::owner_read) != fs::perms::none);
  }
}

TEST_CASE("store: a second daemon lock on one database is refused and names the holder") {
  TempDb db;
  auto first = std::make_unique<DaemonLock>(db.path.string());
  try {
    DaemonLock second(db.path.string());
    FAIL("a second lock was granted");
  } catch (const StoreError& e) {
    const std::string what = e.what();
    CHECK(what.find("in use by another capsweepd") != std::string::npos);
    CHECK(what.find("pid " + std::to_string(::getpid())) != std::string::npos);
  }
  first.reset();  // released: the next one gets it
  CHECK_NOTHROW(DaemonLock(db.path.string()));
}

TEST_CASE("store: step attempts count starts of the same step and reset when it ends") {
  TempDb db;
  Store s(db.path.string());
  s.insert_sweep(sweep_row("a"));
  CHECK(s.begin_step_attempt("a", 0) == 1);
  CHECK(s.begin_step_attempt("a", 0) == 2);  // started again without ending: a crash
  CHECK(s.begin_step_attempt("a", 0) == 3);
  CHECK(s.begin_step_attempt("a", 1) == 1);  // another step starts a new count
  s.end_step_attempt("a");
  CHECK(s.begin_step_attempt("a", 1) == 1);
}

TEST_CASE("store: retention removes old and surplus finished sweeps, never running ones") {
  TempDb db;
  Store s(db.path.string());
  for (const char* id : {"a", "b", "c", "d"}) s.insert_sweep(sweep_row(id));
  s.finish_sweep("a", "succeeded", json::object(), "");
  s.finish_sweep("b", "failed", nullptr, "x");
  s.finish_sweep("c", "succeeded", json::object(), "");
  REQUIRE(s.transition("d", "queued", "running"));
  CHECK(s.prune_finished(0, 0) == 0);
  CHECK(s.prune_finished(0, 2) == 1);  // the oldest finished one goes
  CHECK_FALSE(s.sweep("a").has_value());
  CHECK(s.sweep("b").has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(s.prune_finished(0.01, 0) == 2);  // finished more than 10 ms ago
  CHECK_FALSE(s.sweep("b").has_value());
  CHECK(s.sweep("d").has_value());
  CHECK(s.count_by_status()["running"] == 1);
}

TEST_CASE("store: UTC times read back as written, anything else is refused") {
  const std::string now = utc_now();
  auto t = parse_utc(now);
  REQUIRE(t.has_value());
  CHECK(std::chrono::abs(std::chrono::system_clock::now() - *t) < std::chrono::seconds(5));
  CHECK(parse_utc("2026-11-30T01:02:03.456Z").has_value());
  CHECK_FALSE(parse_utc("2026-11-30 01:02:03").has_value());
  CHECK_FALSE(parse_utc("").has_value());
  CHECK_FALSE(parse_utc("yesterday at noon, UTC").has_value());
}

TEST_CASE("store: a write that finds the disk full makes the database not ready until a write succeeds again") {
  TempDb db;
  Store s(db.path.string());
  Store api(db.path.string());  // another connection of the process on the same file (the API's)
  s.insert_sweep(sweep_row("a"));
  CHECK(api.writable());
  s.limit_pages_for_test(8);  // a database that cannot grow
  bool full = false;
  for (int i = 0; i < 50 && !full; ++i) {
    try {
      s.append_step("a", step_row(i), requests(2000));
    } catch (const StoreError& e) {
      full = true;
      CHECK(std::string(e.what()).find("full") != std::string::npos);
    }
  }
  REQUIRE(full);
  CHECK_FALSE(s.writable());
  CHECK_FALSE(api.writable());      // the API learns of it through the shared flag
  CHECK(s.sweep("a").has_value());  // what was stored before stays readable
  // Space again: after the retry interval the next real write decides.
  s.limit_pages_for_test(1'000'000);
  s.set_write_retry_for_test(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(api.writable());
  s.insert_sweep(sweep_row("b"));
  CHECK(s.writable());
}

TEST_CASE("store: request rows written in batches read back whole, one by one and by page") {
  TempDb db;
  Store s(db.path.string());
  s.insert_sweep(sweep_row("a"));
  s.append_step("a", step_row(0), requests(130));  // two full batches of 64 and a rest of 2
  s.append_step("a", step_row(1), requests(1));
  const auto all = all_requests(s, "a", 10'000);  // one page holds them all
  REQUIRE(all.size() == 131);
  for (std::size_t i = 0; i < 130; ++i) {
    CHECK(all[i].first == 0);
    CHECK(all[i].second.index == i);
    CHECK(all[i].second.scheduled_ms == Approx(10.0 * static_cast<double>(i)));
    CHECK(all[i].second.outcome == (i == 129 ? "incomplete" : "ok"));
    CHECK_FALSE(all[i].second.finished_ms.has_value());  // NULL stays NULL
  }
  CHECK(all[130].first == 1);
  // Pages of 50 give the same rows in the same order.
  const auto paged = all_requests(s, "a", 50);
  REQUIRE(paged.size() == all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    CHECK(paged[i].first == all[i].first);
    CHECK(paged[i].second.index == all[i].second.index);
  }
  CHECK(s.requests_page("nobody", std::nullopt, 50).empty());
}

TEST_CASE("store: datasets are stored once per content, listed, and not deleted while a job names them") {
  TempDb db("datasets");
  Store s(db.path.string());
  DatasetRow d;
  d.id = "ds-00000000000000aa";
  d.sha256 = std::string(62, '0') + "aa";
  d.name = "first";
  d.format = "jsonl";
  d.bytes = 20;
  d.items = 1;
  d.stats = {{"prompt_tokens", {{"max", 3}}}};
  const std::string content = "{\"prompt\": \"a b c\"}\n";
  auto [row, inserted] = s.insert_dataset(d, content);
  CHECK(inserted);
  CHECK_FALSE(row.created_at.empty());
  DatasetRow again = d;
  again.name = "second";
  auto [row2, inserted2] = s.insert_dataset(again, content);
  CHECK_FALSE(inserted2);
  CHECK(row2.name == "first");  // the stored one, unchanged
  CHECK(s.list_datasets(10, 0).size() == 1);
  CHECK(s.dataset(d.id)->stats["prompt_tokens"]["max"] == 3);
  CHECK(s.dataset_content(d.id) == content);
  CHECK_FALSE(s.dataset("ds-ffffffffffffffff").has_value());
  CHECK_FALSE(s.dataset_content("ds-ffffffffffffffff").has_value());

  SweepRow job = sweep_row("sw-1");
  job.spec["workload"] = {{"dataset", {{"id", d.id}}}};
  s.insert_sweep(job);
  CHECK(s.jobs_using_dataset(d.id) == std::vector<std::string>{"sw-1"});
  CHECK(s.delete_dataset(d.id) == Store::DeleteDataset::in_use);
  REQUIRE(s.transition("sw-1", "queued", "running"));
  CHECK(s.delete_dataset(d.id) == Store::DeleteDataset::in_use);
  s.finish_sweep("sw-1", "failed", nullptr, "x");
  CHECK(s.jobs_using_dataset(d.id).empty());
  CHECK(s.delete_dataset(d.id) == Store::DeleteDataset::deleted);
  CHECK(s.delete_dataset(d.id) == Store::DeleteDataset::absent);
  CHECK(s.list_datasets(10, 0).empty());
  CHECK(s.schema_version() == 10);
}

TEST_CASE("store: a trace is a dataset format (version 9), and a format outside the list is refused") {
  TempDb db("trace-datasets");
  Store s(db.path.string());
  CHECK(s.schema_version() == 10);
  DatasetRow d;
  d.id = "ds-00000000000000bb";
  d.sha256 = std::string(62, '0') + "bb";
  d.format = "trace";
  d.bytes = 60;
  d.items = 1;
  d.stats = {{"prompt_tokens", {{"max", 512}}}};
  auto [row, inserted] = s.insert_dataset(d, R"({"timestamp": 0, "input_length": 512, "output_length": 8})");
  CHECK(inserted);
  CHECK(s.dataset(d.id)->format == "trace");
  DatasetRow odd = d;
  odd.id = "ds-00000000000000cc";
  odd.sha256 = std::string(62, '0') + "cc";
  odd.format = "csv";
  CHECK_THROWS_AS(s.insert_dataset(odd, "x"), StoreError);
  CHECK_FALSE(s.dataset(odd.id).has_value());
  CHECK(s.list_datasets(10, 0).size() == 1);
}
