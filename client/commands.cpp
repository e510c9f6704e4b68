#include "commands.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "api_client.hpp"
#include "core/text.hpp"
#include "format.hpp"
#include "lengths.hpp"
#include "llm/dataset.hpp"

namespace capsweep::cli {

namespace {

using json = nlohmann::json;

// Prints a server error naming its field; returns kUsage.
int report_error(const HttpAnswer& a) {
  if (a.status == 0) {
    fmt::print(stderr, "capsweep: cannot reach the server: {}\n", a.error);
    return kUsage;
  }
  const json e = json::parse(a.body, nullptr, false);
  if (e.is_object() && e.contains("error")) {
    const json& err = e["error"];
    const std::string field = text_of(err, "field", "");
    fmt::print(stderr, "capsweep: {} {}{}: {}\n", a.status, text_of(err, "code", ""),
               field.empty() ? "" : " at " + field, text_of(err, "message", ""));
  } else {
    fmt::print(stderr, "capsweep: the server answered {}\n", a.status);
  }
  return kUsage;
}

std::optional<json> get_json(const ApiClient& c, const std::string& path, int& code) {
  auto a = c.request("GET", path);
  if (a.status != 200) {
    code = report_error(a);
    return std::nullopt;
  }
  return json::parse(a.body, nullptr, false);
}

// The exit code a finished job earns.
int exit_for(const json& sweep, std::optional<double> require_rate) {
  const std::string status = text_of(sweep, "status", "");
  if (status != "succeeded") return kJobFailed;
  const json& r = sweep["result"];
  const std::string kind = text_of(r, "kind", "sweep");
  if (kind == "check" || kind == "regression" || kind == "scenario") {
    const std::string v = text_of(r, "verdict", "inconclusive");
    return v == "pass" ? kOk : v == "fail" ? kSloFail : kInconclusive;
  }
  if (!r["max_slo_rate_rps"].is_number()) return kSloFail;
  if (require_rate && r["max_slo_rate_rps"].get<double>() < *require_rate) return kSloFail;
  return kOk;
}

bool finished(const json& v) {
  const std::string s = text_of(v, "status", "");
  return s == "succeeded" || s == "failed" || s == "cancelled";
}

// Follows a job until it ends: a live line on a terminal, plain lines otherwise.
int watch(const ApiClient& c, const std::string& id, const Options& o, std::optional<double> require_rate) {
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  std::string last_plain;
  auto last_print = std::chrono::steady_clock::now() - std::chrono::hours(1);
  int transport_failures = 0;
  while (true) {
    auto a = c.request("GET", "/v1/sweeps/" + id);
    if (a.status == 0 && ++transport_failures < 30) {  // the service may be restarting
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    if (a.status != 200) return report_error(a);
    transport_failures = 0;
    const json v = json::parse(a.body, nullptr, false);
    if (finished(v)) {
      if (tty) fmt::print(stderr, "\r\033[K");
      if (o.json_out) {
        fmt::print("{}\n", v.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
      } else {
        fmt::print("{}\n", terminal_safe(verdict_text(v), true));
        int code = 0;
        // A scenario's windows can run to hundreds: `capsweep windows ID` shows them.
        if (text_of(v, "kind", "") == "scenario") return exit_for(v, require_rate);
        if (auto steps = get_json(c, "/v1/sweeps/" + id + "/steps", code))
          fmt::print("\n{}", terminal_safe(steps_table((*steps)["steps"]), true));
      }
      return exit_for(v, require_rate);
    }
    const std::string line = progress_text(v, tty);
    if (tty) {
      fmt::print(stderr, "\r\033[K{}", line);
      std::fflush(stderr);
    } else {
      // Plain lines: on a new step or phase, else every 15 s.
      const std::string key = text_of(v["progress"], "phase", "") + "/" + v["progress"].value("step", json(0)).dump();
      if (key != last_plain || std::chrono::steady_clock::now() - last_print > std::chrono::seconds(15)) {
        fmt::print(stderr, "{}\n", line);
        last_plain = key;
        last_print = std::chrono::steady_clock::now();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(tty ? 500 : 1000));
  }
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int submit(const ApiClient& c, const std::string& path, bool wait, bool as_check, const Options& o) {
  auto text = read_file(path);
  if (!text) {
    fmt::print(stderr, "capsweep: cannot read {}\n", path);
    return kUsage;
  }
  json spec = json::parse(*text, nullptr, false);
  if (spec.is_discarded()) {
    fmt::print(stderr, "capsweep: {} is not valid JSON\n", path);
    return kUsage;
  }
  if (as_check && text_of(spec, "kind", "sweep") != "check") {
    fmt::print(stderr, "capsweep: {} is not a check job (\"kind\": \"check\")\n", path);
    return kUsage;
  }
  auto a = c.request("POST", "/v1/sweeps", spec.dump());
  if (a.status != 201) return report_error(a);
  const json created = json::parse(a.body);
  const std::string id = created["id"];
  if (o.json_out && !wait)
    fmt::print("{}\n", created.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  else if (!o.json_out)
    fmt::print(stderr, "submitted {} ({})\n", id, text_of(created, "name", ""));
  if (!o.json_out && !wait) fmt::print("{}\n", id);
  return wait ? watch(c, id, o, std::nullopt) : kOk;
}

int report(const ApiClient& c, const Args& a) {
  auto r = c.request("GET", "/v1/sweeps/" + a.id + "/report");
  if (r.status != 200) return report_error(r);
  std::ofstream out(a.output, std::ios::binary);
  out << r.body;
  if (!out) {
    fmt::print(stderr, "capsweep: cannot write {}\n", a.output);
    return kUsage;
  }
  fmt::print(stderr, "wrote {} ({} bytes)\n", a.output, r.body.size());
  return kOk;
}

std::string query_encode(const std::string& v) {
  return percent_encode(v);
}

int autoscale(const ApiClient& c, const Args& a) {
  const AutoscaleArgs& s = a.autoscale;
  std::string path = fmt::format("/v1/sweeps/{}/autoscale?format={}&u={}", a.id, s.format, s.utilization);
  if (s.base_rps) path += fmt::format("&base_rps={}", *s.base_rps);
  if (s.peak_rps) path += fmt::format("&peak_rps={}", *s.peak_rps);
  if (s.cold_start_s) path += fmt::format("&cold_start_s={}", *s.cold_start_s);
  if (!s.model.empty()) path += "&model=" + query_encode(s.model);
  if (!s.ns.empty()) path += "&namespace=" + query_encode(s.ns);
  if (!s.deployment.empty()) path += "&deployment=" + query_encode(s.deployment);
  if (!s.prometheus.empty()) path += "&prometheus=" + query_encode(s.prometheus);
  auto r = c.request("GET", path);
  if (r.status != 200) return report_error(r);
  fmt::print("{}", terminal_safe(r.body, true));
  if (!r.body.empty() && r.body.back() != '\n') fmt::print("\n");
  return kOk;
}

int agents_manifest(const ApiClient& c, const Args& a) {
  std::string query;
  const auto add = [&query](const char* key, const std::string& v) {
    if (!v.empty()) query += fmt::format("{}{}={}", query.empty() ? "?" : "&", key, query_encode(v));
  };
  add("image", a.agents.image);
  add("server", a.agents.server);
  add("secret", a.agents.secret);
  add("namespace", a.agents.ns);
  auto r = c.request("GET", "/v1/sweeps/" + a.id + "/agents/job" + query);
  if (r.status != 200) return report_error(r);
  const json job = json::parse(r.body, nullptr, false);
  fmt::print("{}\n", job.is_discarded() ? terminal_safe(r.body, true)
                                        : job.dump(2, ' ', false, json::error_handler_t::replace));
  return kOk;
}

int cancel(const ApiClient& c, const Args& a) {
  auto r = c.request("POST", "/v1/sweeps/" + a.id + "/cancel");
  if (r.status != 202) return report_error(r);
  fmt::print("{}\n", a.o.json_out ? terminal_safe(r.body, true) : "cancelled " + a.id);
  return kOk;
}

int status(const ApiClient& c, const Args& a) {
  int code = kOk;
  auto v = get_json(c, "/v1/sweeps/" + a.id, code);
  if (!v) return code;
  if (a.o.json_out)
    fmt::print("{}\n", v->dump(2, ' ', false, json::error_handler_t::replace));
  else
    fmt::print("{}  {}  {}\n{}\n", a.id, text_of(*v, "status", ""), text_of(*v, "name", ""), progress_text(*v));
  return kOk;
}

int verdict(const ApiClient& c, const Args& a) {
  int code = kOk;
  auto v = get_json(c, "/v1/sweeps/" + a.id, code);
  if (!v) return code;
  if (!finished(*v)) {
    fmt::print(stderr, "capsweep: {} has not finished ({})\n", a.id, text_of(*v, "status", ""));
    return kUsage;
  }
  if (a.o.json_out)
    fmt::print("{}\n", (*v)["result"].dump(2, ' ', false, json::error_handler_t::replace));
  else
    fmt::print("{}\n", terminal_safe(verdict_text(*v), true));
  return exit_for(*v, a.require_rate);
}

// capsweep compare ID: a regression job's verdict table.
int compare(const ApiClient& c, const Args& a) {
  int code = kOk;
  auto v = get_json(c, "/v1/sweeps/" + a.id, code);
  if (!v) return code;
  if (text_of(*v, "kind", "") != "regression") {
    fmt::print(stderr, "capsweep: {} is a {} job; compare reads regression jobs\n", a.id, text_of(*v, "kind", "?"));
    return kUsage;
  }
  if (!finished(*v)) {
    fmt::print(stderr, "capsweep: {} has not finished ({})\n", a.id, text_of(*v, "status", ""));
    return kUsage;
  }
  if (a.o.json_out)
    fmt::print("{}\n", (*v)["result"].dump(2, ' ', false, json::error_handler_t::replace));
  else
    fmt::print("{}\n", terminal_safe(verdict_text(*v), true));
  return exit_for(*v, std::nullopt);
}

// A job's rows (`key` of GET /v1/sweeps/{id}/`key`) as JSON, or as the table `table` makes.
int rows(const ApiClient& c, const Args& a, const char* key, std::string (*table)(const json&)) {
  int code = kOk;
  auto r = get_json(c, "/v1/sweeps/" + a.id + "/" + key, code);
  if (!r) return code;
  if (a.o.json_out)
    fmt::print("{}\n", r->dump(2, ' ', false, json::error_handler_t::replace));
  else
    fmt::print("{}", terminal_safe(table((*r)[key]), true));
  return kOk;
}

int list(const ApiClient& c, const Args& a) {
  int code = kOk;
  std::string path = fmt::format("/v1/sweeps?limit={}", a.limit);
  if (!a.status_filter.empty()) path += "&status=" + query_encode(a.status_filter);
  auto l = get_json(c, path, code);
  if (!l) return code;
  if (a.o.json_out) {
    fmt::print("{}\n", l->dump(2, ' ', false, json::error_handler_t::replace));
    return kOk;
  }
  fmt::print("{:<20} {:<6} {:<10} {:<25} {:>12}  {}\n", "id", "kind", "status", "created", "max req/s", "name");
  for (const auto& s : (*l)["sweeps"]) {
    std::string rate = "-";
    if (s["result"].is_object()) {
      const json& r = s["result"];
      if (r.contains("max_slo_rate_rps") && r["max_slo_rate_rps"].is_number())
        rate = fmt::format("{:.1f}", r["max_slo_rate_rps"].get<double>());
      if (r.contains("verdict")) rate = text_of(r, "verdict", "-");
    }
    std::string labels;
    if (s.contains("labels") && s["labels"].is_object()) {
      for (const auto& [k, v] : s["labels"].items())
        if (v.is_string()) labels += fmt::format(" {}={}", terminal_safe(k), terminal_safe(v.get<std::string>()));
    }
    fmt::print("{:<20} {:<6} {:<10} {:<25} {:>12}  {}{}\n", text_of(s, "id", ""), text_of(s, "kind", ""),
               text_of(s, "status", ""), text_of(s, "created_at", ""), rate, text_of(s, "name", ""),
               labels.empty() ? "" : "  [" + labels.substr(1) + "]");
  }
  return kOk;
}

std::string dataset_line(const json& d) {
  const json& p = d.value("stats", json::object()).value("prompt_tokens", json::object());
  std::string lengths = "-";
  if (p.value("p50", json()).is_number())
    lengths =
        fmt::format("{:.0f}/{:.0f}/{:.0f}", p["p50"].get<double>(), p["p95"].get<double>(), p["max"].get<double>());
  return fmt::format("{:<20} {:<9} {:>8} {:>11} {:>15}  {:<25} {}\n", text_of(d, "id", ""), text_of(d, "format", ""),
                     d.value("items", json(0)).dump(), d.value("bytes", json(0)).dump(), lengths,
                     text_of(d, "created_at", ""), text_of(d, "name", ""));
}

std::string dataset_header() {
  return fmt::format("{:<20} {:<9} {:>8} {:>11} {:>15}  {:<25} {}\n", "id", "format", "items", "bytes",
                     "prompt p50/p95/max", "created", "name");
}

// capsweep dataset upload FILE [--name N] [--format F]: prints the id (stdout) for scripts.
int dataset_upload(const ApiClient& c, const Args& a) {
  auto text = read_file(a.file);
  if (!text) {
    fmt::print(stderr, "capsweep: cannot read {}\n", a.file);
    return kUsage;
  }
  std::string path = "/v1/datasets";
  std::string sep = "?";
  if (!a.name.empty()) {
    path += sep + "name=" + query_encode(a.name);
    sep = "&";
  }
  if (!a.format.empty()) path += sep + "format=" + a.format;
  const bool sharegpt =
      a.format.empty() ? llm::sniff_dataset_format(*text) == llm::DatasetFormat::sharegpt : a.format == "sharegpt";
  auto r = c.request("POST", path, *text, sharegpt ? "application/json" : "application/x-ndjson");
  if (r.status != 201 && r.status != 200) return report_error(r);
  const json d = json::parse(r.body, nullptr, false);
  if (a.o.json_out) {
    fmt::print("{}\n", d.dump(2, ' ', false, json::error_handler_t::replace));
    return kOk;
  }
  fmt::print(stderr, "{} {} ({} items, sha256 {})\n", r.status == 201 ? "stored" : "already stored as",
             terminal_safe(text_of(d, "id", "")), d.value("items", json(0)).dump(),
             terminal_safe(text_of(d, "sha256", "")));
  fmt::print("{}\n", terminal_safe(text_of(d, "id", "")));
  return kOk;
}

int dataset_list(const ApiClient& c, const Args& a) {
  int code = kOk;
  auto l = get_json(c, "/v1/datasets", code);
  if (!l) return code;
  if (a.o.json_out) {
    fmt::print("{}\n", l->dump(2, ' ', false, json::error_handler_t::replace));
    return kOk;
  }
  std::string out = dataset_header();
  for (const auto& d : (*l)["datasets"]) out += dataset_line(d);
  fmt::print("{}", terminal_safe(out, true));
  return kOk;
}

int dataset_show(const ApiClient& c, const Args& a) {
  int code = kOk;
  auto d = get_json(c, "/v1/datasets/" + query_encode(a.id), code);
  if (!d) return code;
  if (a.o.json_out) {
    fmt::print("{}\n", d->dump(2, ' ', false, json::error_handler_t::replace));
    return kOk;
  }
  std::string out = dataset_header() + dataset_line(*d);
  out += fmt::format("sha256 {}\n", text_of(*d, "sha256", ""));
  for (const char* key : {"prompt_tokens", "output_tokens"}) {
    const json& s = d->value("stats", json::object()).value(key, json::object());
    if (s.value("p50", json()).is_number())
      out += fmt::format("{:<14} {} items  p50 {:.1f}  p95 {:.1f}  max {:.0f}\n", key, s.value("items", json(0)).dump(),
                         s["p50"].get<double>(), s["p95"].get<double>(), s["max"].get<double>());
  }
  const json users = d->value("used_by", json::array());
  out += users.empty() ? "used by no queued or running job\n" : "used by " + users.dump() + "\n";
  fmt::print("{}", terminal_safe(out, true));
  return kOk;
}

int dataset_rm(const ApiClient& c, const Args& a) {
  auto r = c.request("DELETE", "/v1/datasets/" + query_encode(a.id));
  if (r.status != 204) return report_error(r);
  if (!a.o.json_out) fmt::print(stderr, "deleted {}\n", terminal_safe(a.id));
  return kOk;
}

// capsweep lengths FILE: read locally, nothing is sent.
int lengths(const Args& a) {
  auto text = read_file(a.file);
  if (!text) {
    fmt::print(stderr, "capsweep: cannot read {}\n", a.file);
    return kUsage;
  }
  auto l = read_lengths(*text);
  if (!l) {
    fmt::print(stderr, "capsweep: {}: {}\n", a.file, l.error().message);
    return kUsage;
  }
  const json summary = lengths_summary(*l, a.bins);
  if (a.o.json_out)
    fmt::print("{}\n", summary.dump(2));
  else
    fmt::print("{}", lengths_text(summary));
  return kOk;
}

}  // namespace

int run_command(const Args& a) {
  if (a.command == "lengths") return lengths(a);
  std::string error;
  auto url = parse_server_url(a.o.server, error);
  if (!url) {
    fmt::print(stderr, "capsweep: --server: {}\n", error);
    return kUsage;
  }
  const ApiClient c(*url, a.o.token);
  if (a.command == "submit") return submit(c, a.spec_path, a.wait, false, a.o);
  if (a.command == "check") return submit(c, a.spec_path, true, true, a.o);
  if (a.command == "watch") return watch(c, a.id, a.o, std::nullopt);
  if (a.command == "report") return report(c, a);
  if (a.command == "autoscale") return autoscale(c, a);
  if (a.command == "cancel") return cancel(c, a);
  if (a.command == "status") return status(c, a);
  if (a.command == "verdict") return verdict(c, a);
  if (a.command == "compare") return compare(c, a);
  if (a.command == "steps") return rows(c, a, "steps", steps_table);
  // A scenario's windows, as stored so far (also while it runs).
  if (a.command == "windows") return rows(c, a, "windows", windows_table);
  if (a.command == "list") return list(c, a);
  if (a.command == "dataset-upload") return dataset_upload(c, a);
  if (a.command == "dataset-list") return dataset_list(c, a);
  if (a.command == "dataset-show") return dataset_show(c, a);
  if (a.command == "dataset-rm") return dataset_rm(c, a);
  if (a.command == "agents-manifest") return agents_manifest(c, a);
  return kUsage;
}

}  // namespace capsweep::cli
