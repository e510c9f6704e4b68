// capsweep: the command-line client of capsweepd. Only wiring here: arguments (CLI11), the
// API client, and the exit codes CI pipelines gate on:
//   0 success / SLO pass, 1 usage or transport error, 2 job failed or cancelled,
//   3 SLO verdict fail (or below --require-rate), 4 inconclusive.

#include "api_client.hpp"
#include "format.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

using namespace capsweep::cli;
using json = nlohmann::json;

namespace {

enum Exit { kOk = 0, kUsage = 1, kJobFailed = 2, kSloFail = 3, kInconclusive = 4 };

struct Options {
  std::string server = "http://127.0.0.1:8080";
  std::string token;
  bool json_out = false;
};

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
    fmt::print(stderr, "capsweep: {} {}{}: {}\n", a.status, text_of(err, "code", ""), field.empty() ? "" : " at " + field,
               text_of(err, "message", ""));
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
  if (text_of(r, "kind", "sweep") == "check") {
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
        if (auto steps = get_json(c, "/v1/sweeps/" + id + "/steps", code)) fmt::print("\n{}", terminal_safe(steps_table((*steps)["steps"]), true));
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
  std::ifstream in(path);
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
  if (o.json_out && !wait) fmt::print("{}\n", created.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  else if (!o.json_out) fmt::print(stderr, "submitted {} ({})\n", id, text_of(created, "name", ""));
  if (!o.json_out && !wait) fmt::print("{}\n", id);
  return wait ? watch(c, id, o, std::nullopt) : kOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"capsweep: submit capacity sweeps to capsweepd, follow them, read their verdicts"};
  app.require_subcommand(1);
  Options o;
  if (const char* env = std::getenv("CAPSWEEP_SERVER")) o.server = env;
  if (const char* env = std::getenv("CAPSWEEP_TOKEN")) o.token = env;
  app.add_option("--server", o.server, "capsweepd URL (env CAPSWEEP_SERVER)")->capture_default_str();
  app.add_option("--token", o.token, "bearer token (env CAPSWEEP_TOKEN)");
  app.add_flag("--json", o.json_out, "machine-readable output");
  app.footer("Exit codes: 0 success/pass, 1 usage or transport error, 2 job failed or cancelled, "
             "3 SLO verdict fail, 4 inconclusive.");

  std::string spec_path, id, status_filter;
  bool wait = false;
  int limit = 20;
  double require_rate = 0;
  auto* submit_cmd = app.add_subcommand("submit", "submit a job spec (sweep or check)");
  submit_cmd->add_option("SPEC", spec_path, "job spec JSON file")->required();
  submit_cmd->add_flag("--wait", wait, "follow the job and print its verdict (exit code from the verdict)");
  auto* check_cmd = app.add_subcommand("check", "submit a check job and wait for its verdict");
  check_cmd->add_option("SPEC", spec_path, "check job spec JSON file")->required();
  auto* status_cmd = app.add_subcommand("status", "status and progress of a job");
  status_cmd->add_option("ID", id, "job id")->required();
  auto* watch_cmd = app.add_subcommand("watch", "follow a job until it ends (progress bar on a terminal)");
  watch_cmd->add_option("ID", id, "job id")->required();
  auto* verdict_cmd = app.add_subcommand("verdict", "the verdict of a finished job");
  verdict_cmd->add_option("ID", id, "job id")->required();
  auto* require = verdict_cmd->add_option("--require-rate", require_rate, "exit 3 when max_slo_rate_rps is below R");
  auto* steps_cmd = app.add_subcommand("steps", "the stored steps of a job, as a table");
  steps_cmd->add_option("ID", id, "job id")->required();
  auto* list_cmd = app.add_subcommand("list", "jobs, newest first");
  list_cmd->add_option("--status", status_filter, "queued, running, succeeded, failed or cancelled");
  list_cmd->add_option("--limit", limit, "how many")->check(CLI::Range(1, 1000));
  auto* cancel_cmd = app.add_subcommand("cancel", "stop a job (its stored steps stay)");
  cancel_cmd->add_option("ID", id, "job id")->required();

  std::string format = "keda", model, ns, deployment, prometheus;
  double utilization = 0.7, base_rps = 0, peak_rps = 0, cold_start_s = 0;
  auto* autoscale_cmd = app.add_subcommand("autoscale", "autoscaler thresholds from a succeeded sweep (KEDA, HPA or JSON)");
  autoscale_cmd->add_option("ID", id, "sweep id")->required();
  autoscale_cmd->add_option("--format", format, "keda, hpa or json")->check(CLI::IsMember({"keda", "hpa", "json"}))->capture_default_str();
  autoscale_cmd->add_option("--utilization", utilization, "target utilisation u of a replica's capacity")->capture_default_str();
  auto* base_opt = autoscale_cmd->add_option("--base-rps", base_rps, "steady traffic, req/s (sets the minimum replicas)");
  auto* peak_opt = autoscale_cmd->add_option("--peak-rps", peak_rps, "peak traffic, req/s (sets the maximum replicas)");
  auto* cold_opt = autoscale_cmd->add_option("--cold-start-s", cold_start_s, "a replica's start-up time (scale-down window >= 2x)");
  autoscale_cmd->add_option("--model", model, "model_name label of the vLLM metrics (default: the sweep's model)");
  autoscale_cmd->add_option("--namespace", ns, "Kubernetes namespace (default: default)");
  autoscale_cmd->add_option("--deployment", deployment, "the Deployment to scale (default: from the model name)");
  autoscale_cmd->add_option("--prometheus", prometheus, "Prometheus server address for KEDA");

  std::string output;
  auto* report_cmd = app.add_subcommand("report", "the HTML report of a job (charts, steps, warnings)");
  report_cmd->add_option("ID", id, "job id")->required();
  report_cmd->add_option("-o,--output", output, "file to write (FILE.html)")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kUsage;
  }

  std::string error;
  auto url = parse_server_url(o.server, error);
  if (!url) {
    fmt::print(stderr, "capsweep: --server: {}\n", error);
    return kUsage;
  }
  const ApiClient c(*url, o.token);
  int code = kOk;

  if (*submit_cmd) return submit(c, spec_path, wait, false, o);
  if (*check_cmd) return submit(c, spec_path, true, true, o);
  if (*watch_cmd) return watch(c, id, o, std::nullopt);
  if (*report_cmd) {
    auto a = c.request("GET", "/v1/sweeps/" + id + "/report");
    if (a.status != 200) return report_error(a);
    std::ofstream out(output, std::ios::binary);
    out << a.body;
    if (!out) {
      fmt::print(stderr, "capsweep: cannot write {}\n", output);
      return kUsage;
    }
    fmt::print(stderr, "wrote {} ({} bytes)\n", output, a.body.size());
    return kOk;
  }
  if (*autoscale_cmd) {
    auto encode = [](const std::string& v) {
      std::string out;
      for (unsigned char ch : v) {
        if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') out += static_cast<char>(ch);
        else out += fmt::format("%{:02X}", ch);
      }
      return out;
    };
    std::string path = fmt::format("/v1/sweeps/{}/autoscale?format={}&u={}", id, format, utilization);
    if (*base_opt) path += fmt::format("&base_rps={}", base_rps);
    if (*peak_opt) path += fmt::format("&peak_rps={}", peak_rps);
    if (*cold_opt) path += fmt::format("&cold_start_s={}", cold_start_s);
    if (!model.empty()) path += "&model=" + encode(model);
    if (!ns.empty()) path += "&namespace=" + encode(ns);
    if (!deployment.empty()) path += "&deployment=" + encode(deployment);
    if (!prometheus.empty()) path += "&prometheus=" + encode(prometheus);
    auto a = c.request("GET", path);
    if (a.status != 200) return report_error(a);
    fmt::print("{}", terminal_safe(a.body, true));
    if (!a.body.empty() && a.body.back() != '\n') fmt::print("\n");
    return kOk;
  }
  if (*cancel_cmd) {
    auto a = c.request("POST", "/v1/sweeps/" + id + "/cancel");
    if (a.status != 202) return report_error(a);
    fmt::print("{}\n", o.json_out ? terminal_safe(a.body, true) : "cancelled " + id);
    return kOk;
  }
  if (*status_cmd || *verdict_cmd) {
    auto v = get_json(c, "/v1/sweeps/" + id, code);
    if (!v) return code;
    if (*status_cmd) {
      if (o.json_out) fmt::print("{}\n", v->dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
      else fmt::print("{}  {}  {}\n{}\n", id, text_of(*v, "status", ""), text_of(*v, "name", ""), progress_text(*v));
      return kOk;
    }
    if (!finished(*v)) {
      fmt::print(stderr, "capsweep: {} has not finished ({})\n", id, text_of(*v, "status", ""));
      return kUsage;
    }
    if (o.json_out) fmt::print("{}\n", (*v)["result"].dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    else fmt::print("{}\n", terminal_safe(verdict_text(*v), true));
    return exit_for(*v, *require ? std::optional<double>(require_rate) : std::nullopt);
  }
  if (*steps_cmd) {
    auto s = get_json(c, "/v1/sweeps/" + id + "/steps", code);
    if (!s) return code;
    if (o.json_out) fmt::print("{}\n", s->dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    else fmt::print("{}", terminal_safe(steps_table((*s)["steps"]), true));
    return kOk;
  }
  if (*list_cmd) {
    std::string path = fmt::format("/v1/sweeps?limit={}", limit);
    if (!status_filter.empty()) path += "&status=" + status_filter;
    auto l = get_json(c, path, code);
    if (!l) return code;
    if (o.json_out) {
      fmt::print("{}\n", l->dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
      return kOk;
    }
    fmt::print("{:<20} {:<6} {:<10} {:<25} {:>12}  {}\n", "id", "kind", "status", "created", "max req/s", "name");
    for (const auto& s : (*l)["sweeps"]) {
      std::string rate = "-";
      if (s["result"].is_object()) {
        const json& r = s["result"];
        if (r.contains("max_slo_rate_rps") && r["max_slo_rate_rps"].is_number()) rate = fmt::format("{:.1f}", r["max_slo_rate_rps"].get<double>());
        if (r.contains("verdict")) rate = text_of(r, "verdict", "-");
      }
      fmt::print("{:<20} {:<6} {:<10} {:<25} {:>12}  {}\n", text_of(s, "id", ""), text_of(s, "kind", ""), text_of(s, "status", ""),
                 text_of(s, "created_at", ""), rate, text_of(s, "name", ""));
    }
    return kOk;
  }
  return kUsage;
}
