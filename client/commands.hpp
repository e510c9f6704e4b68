#pragma once
// The commands of the capsweep CLI, one function each, and the arguments they take. Exit codes
// are what CI pipelines gate on:
//   0 success / SLO pass, 1 usage or transport error, 2 job failed or cancelled,
//   3 SLO verdict fail (or below --require-rate), 4 inconclusive.

#include <optional>
#include <string>

namespace capsweep::cli {

enum Exit { kOk = 0, kUsage = 1, kJobFailed = 2, kSloFail = 3, kInconclusive = 4 };

struct Options {
  std::string server = "http://127.0.0.1:8080";
  std::string token;
  bool json_out = false;
};

// capsweep agents manifest: the Indexed Job's settings (empty: capsweepd's defaults).
struct AgentsArgs {
  std::string image, server, secret, ns;
};

struct AutoscaleArgs {
  std::string format = "keda", model, ns, deployment, prometheus;
  double utilization = 0.7;
  std::optional<double> base_rps, peak_rps, cold_start_s;
};

// One parsed command line.
struct Args {
  Options o;
  // submit, check, status, watch, verdict, steps, list, cancel, autoscale, report, lengths,
  // dataset-upload, dataset-list, dataset-show, dataset-rm, agents-manifest
  std::string command;
  std::string spec_path, id, status_filter, output;
  bool wait = false;
  int limit = 20;
  std::optional<double> require_rate;
  AutoscaleArgs autoscale;
  AgentsArgs agents;
  std::string file, name, format;  // dataset upload, lengths
  std::size_t bins = 16;           // lengths
};

// Runs the command against the server; returns the exit code.
int run_command(const Args& args);

}  // namespace capsweep::cli
