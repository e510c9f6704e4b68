#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <cstdlib>

namespace capsweep::cli {

namespace {

void add_job_commands(CLI::App& app, Args& a) {
  auto* submit = app.add_subcommand("submit", "submit a job spec (sweep, check, regression or scenario)");
  submit->add_option("SPEC", a.spec_path, "job spec JSON file")->required();
  submit->add_flag("--wait", a.wait, "follow the job and print its verdict (exit code from the verdict)");
  auto* check = app.add_subcommand("check", "submit a check job and wait for its verdict");
  check->add_option("SPEC", a.spec_path, "check job spec JSON file")->required();
  app.add_subcommand("status", "status and progress of a job")->add_option("ID", a.id, "job id")->required();
  app.add_subcommand("watch", "follow a job until it ends (progress bar on a terminal)")
      ->add_option("ID", a.id, "job id")
      ->required();
  auto* verdict = app.add_subcommand("verdict", "the verdict of a finished job");
  verdict->add_option("ID", a.id, "job id")->required();
  verdict->add_option("--require-rate", a.require_rate, "exit 3 when max_slo_rate_rps is below R");
  app.add_subcommand("steps", "the stored steps of a job, as a table")->add_option("ID", a.id, "job id")->required();
  app.add_subcommand("compare", "a regression job's verdict: each metric and quality check of both sides")
      ->add_option("ID", a.id, "job id")
      ->required();
  app.add_subcommand("windows", "a scenario job's windows (rate, TTFT, errors, replicas), as a table")
      ->add_option("ID", a.id, "job id")
      ->required();
  auto* list = app.add_subcommand("list", "jobs, newest first");
  list->add_option("--status", a.status_filter, "queued, running, succeeded, failed or cancelled");
  list->add_option("--limit", a.limit, "how many")->check(CLI::Range(1, 1000));
  app.add_subcommand("cancel", "stop a job (its stored steps stay)")->add_option("ID", a.id, "job id")->required();
  auto* report = app.add_subcommand("report", "the HTML report of a job (charts, steps, warnings)");
  report->add_option("ID", a.id, "job id")->required();
  report->add_option("-o,--output", a.output, "file to write (FILE.html)")->required();
}

void add_autoscale(CLI::App& app, Args& a) {
  AutoscaleArgs& s = a.autoscale;
  auto* cmd = app.add_subcommand("autoscale", "autoscaler thresholds from a succeeded sweep (KEDA, HPA or JSON)");
  cmd->add_option("ID", a.id, "sweep id")->required();
  cmd->add_option("--format", s.format, "keda, hpa or json")
      ->check(CLI::IsMember({"keda", "hpa", "json"}))
      ->capture_default_str();
  cmd->add_option("--utilization", s.utilization, "target utilisation u of a replica's capacity")
      ->capture_default_str();
  cmd->add_option("--base-rps", s.base_rps, "steady traffic, req/s (sets the minimum replicas)");
  cmd->add_option("--peak-rps", s.peak_rps, "peak traffic, req/s (sets the maximum replicas)");
  cmd->add_option("--cold-start-s", s.cold_start_s, "a replica's start-up time (scale-down window >= 2x)");
  cmd->add_option("--model", s.model, "model_name label of the vLLM metrics (default: the sweep's model)");
  cmd->add_option("--namespace", s.ns, "Kubernetes namespace (default: default)");
  cmd->add_option("--deployment", s.deployment, "the Deployment to scale (default: from the model name)");
  cmd->add_option("--prometheus", s.prometheus, "Prometheus server address for KEDA");
}

void add_agents_commands(CLI::App& app, Args& a) {
  auto* agents = app.add_subcommand("agents", "load agents of a job with \"agents\": N (manifest)");
  agents->require_subcommand(1);
  auto* m =
      agents->add_subcommand("manifest", "the Kubernetes Indexed Job that runs a job's agents, for kubectl apply -f -");
  m->add_option("ID", a.id, "job id")->required();
  m->add_option("--image", a.agents.image, "the capsweep image (holds capsweep-agent)");
  m->add_option("--agent-server", a.agents.server,
                "capsweepd's URL as the agents reach it (e.g. http://capsweepd:8080)");
  m->add_option("--secret", a.agents.secret, "the Secret holding the agent token (key: token)");
  m->add_option("--namespace", a.agents.ns, "the Job's namespace");
}

void add_dataset_commands(CLI::App& app, Args& a) {
  auto* ds = app.add_subcommand("dataset", "prompt datasets stored by capsweepd (upload, list, show, rm)");
  ds->require_subcommand(1);
  auto* up = ds->add_subcommand("upload", "upload a JSONL, ShareGPT or trace file; prints its id");
  up->add_option("FILE", a.file, "the dataset file")->required()->check(CLI::ExistingFile);
  up->add_option("--name", a.name, "a name to list it by");
  up->add_option("--format", a.format,
                 "jsonl, sharegpt or trace (timestamped rows to replay; default: jsonl or sharegpt from the file's "
                 "first character)")
      ->check(CLI::IsMember({"jsonl", "sharegpt", "trace"}));
  ds->add_subcommand("list", "stored datasets, newest first");
  ds->add_subcommand("show", "one dataset: items, sha256, lengths, the jobs using it")
      ->add_option("ID", a.id, "dataset id")
      ->required();
  ds->add_subcommand("rm", "delete a dataset (refused while a queued or running job uses it)")
      ->add_option("ID", a.id, "dataset id")
      ->required();
  auto* lengths = app.add_subcommand(
      "lengths", "token lengths of a dataset file or a CSV of counts, as ready prompt_tokens/output_tokens blocks");
  lengths->add_option("FILE", a.file, "JSONL, ShareGPT, or CSV of token counts")->required()->check(CLI::ExistingFile);
  lengths->add_option("--bins", a.bins, "bins of the empirical histogram")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
}

}  // namespace

std::variant<Args, int> parse_args(int argc, char** argv) {
  CLI::App app{"capsweep: submit capacity sweeps to capsweepd, follow them, read their verdicts"};
  app.require_subcommand(1);
  Args a;
  if (const char* env = std::getenv("CAPSWEEP_SERVER")) a.o.server = env;
  if (const char* env = std::getenv("CAPSWEEP_TOKEN")) a.o.token = env;
  app.add_option("--server", a.o.server, "capsweepd URL (env CAPSWEEP_SERVER)")->capture_default_str();
  app.add_option("--token", a.o.token, "bearer token (env CAPSWEEP_TOKEN)");
  app.add_flag("--json", a.o.json_out, "machine-readable output");
  app.footer(
      "Exit codes: 0 success/pass, 1 usage or transport error, 2 job failed or cancelled, "
      "3 SLO verdict fail, 4 inconclusive.");
  add_job_commands(app, a);
  add_autoscale(app, a);
  add_dataset_commands(app, a);
  add_agents_commands(app, a);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return static_cast<int>(kUsage);
  }
  const CLI::App* cmd = app.get_subcommands().front();
  a.command = cmd->get_name();
  if (a.command == "dataset" || a.command == "agents") a.command += "-" + cmd->get_subcommands().front()->get_name();
  return a;
}

}  // namespace capsweep::cli
