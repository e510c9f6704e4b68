// Handlers of the datasets resource: upload, list, read, delete. A dataset is stored once per
// content (its id comes from the SHA-256 of the bytes); jobs name it in workload.dataset.

#include <fmt/format.h>

#include <map>

#include "api/guard.hpp"
#include "api/handlers.hpp"
#include "core/text.hpp"
#include "llm/dataset.hpp"

namespace capsweep::api {

namespace {

using json = nlohmann::json;

ApiError no_dataset(const std::string& id) {
  return api_error(errc::not_found, fmt::format("no dataset {}", printable_ascii(id, 64)), "id");
}

// A job names a dataset that is not stored: the spec is at fault (400), naming its field.
Error no_dataset_at(const std::string& id, const std::string& field) {
  return Error{errc::invalid_argument,
               fmt::format("no dataset {} is stored (POST /v1/datasets first)", printable_ascii(id, 64)), field};
}

json lengths_json(const llm::DatasetStats::Lengths& l) {
  if (l.count == 0) return {{"items", 0}, {"p50", nullptr}, {"p95", nullptr}, {"max", nullptr}};
  return {{"items", l.count}, {"p50", l.p50}, {"p95", l.p95}, {"max", l.max}};
}

json dataset_view(const store::DatasetRow& d) {
  return {{"id", d.id},         {"name", d.name},   {"format", d.format},         {"items", d.items},
          {"sha256", d.sha256}, {"bytes", d.bytes}, {"created_at", d.created_at}, {"stats", d.stats}};
}

// The first line of a JSONL body nested deeper than `max_depth`, as "line N: /pointer".
std::optional<std::string> jsonl_too_deep(std::string_view text, int max_depth) {
  std::optional<std::string> found;
  for_each_line(text, [&](std::string_view line, std::size_t line_no) {
    if (auto p = json_too_deep(line, max_depth)) found = fmt::format("line {}: {}", line_no, *p);
    return !found;
  });
  return found;
}

}  // namespace

// POST /v1/datasets?name=&format=jsonl|sharegpt|trace: the body is the file.
Answer create_dataset(Env& env, const Call& c) {
  const ServiceConfig& config = *env.ctx.config;
  const std::string& body = c.req.body();
  if (body.empty()) return api_error(errc::invalid_argument, "the body is the dataset file; it is empty", "body");
  llm::DatasetFormat format = llm::sniff_dataset_format(body);
  if (auto f = c.query.find("format"); f != c.query.end()) {
    auto parsed = llm::parse_dataset_format(f->second);
    if (!parsed) return api_error(errc::invalid_argument, "format must be jsonl, sharegpt or trace", "format");
    format = *parsed;
  }
  std::string name;
  if (auto n = c.query.find("name"); n != c.query.end()) {
    if (n->second.size() > 200 || printable_ascii(n->second, 200) != n->second) {
      return api_error(errc::invalid_argument, "name must be at most 200 printable ASCII characters", "name");
    }
    name = n->second;
  }
  const int depth = config.limits.max_json_depth;
  const auto deep = format == llm::DatasetFormat::sharegpt ? json_too_deep(body, depth) : jsonl_too_deep(body, depth);
  if (deep) {
    return api_error(errc::invalid_argument, fmt::format("nested deeper than the service's limit of {} levels", depth),
                     *deep);
  }
  auto stats = llm::scan_dataset(format, body);
  if (!stats) return from_error(stats.error());
  store::DatasetRow row;
  row.sha256 = llm::sha256_hex(body);
  row.id = llm::dataset_id(row.sha256);
  row.name = name;
  row.format = std::string(llm::to_string(format));
  row.bytes = body.size();
  row.items = stats->items;
  row.stats = {{"counter", format == llm::DatasetFormat::trace ? "tokens" : "words"},
               {"prompt_tokens", lengths_json(stats->prompt_tokens)},
               {"output_tokens", lengths_json(stats->output_tokens)}};
  if (!env.ctx.store->writable()) {
    return api_error(errc::unavailable, "the database cannot be written now (disk full or locked); nothing was stored");
  }
  auto [stored, inserted] = env.ctx.store->insert_dataset(row, body);
  json view = dataset_view(stored);
  view["created"] = inserted;
  Response res = json_ok(c.req, inserted ? bhttp::status::created : bhttp::status::ok, view);
  res.set(bhttp::field::location, "/v1/datasets/" + stored.id);
  return res;
}

// GET /v1/datasets: newest first.
Answer list_datasets(Env& env, const Call& c) {
  json items = json::array();
  for (const auto& d : env.ctx.store->list_datasets(1000, 0)) items.push_back(dataset_view(d));
  return json_ok(c.req, bhttp::status::ok, {{"datasets", items}});
}

Answer get_dataset(Env& env, const Call& c) {
  auto d = env.ctx.store->dataset(c.id);
  if (!d) return no_dataset(c.id);
  json view = dataset_view(*d);
  view["used_by"] = env.ctx.store->jobs_using_dataset(c.id);
  return json_ok(c.req, bhttp::status::ok, view);
}

// DELETE /v1/datasets/{id}: 409 while a queued or running job names it.
Answer delete_dataset(Env& env, const Call& c) {
  switch (env.ctx.store->delete_dataset(c.id)) {
    case store::Store::DeleteDataset::deleted:
      return no_content(c.req);
    case store::Store::DeleteDataset::absent:
      return no_dataset(c.id);
    case store::Store::DeleteDataset::in_use:
      break;
  }
  const auto users = env.ctx.store->jobs_using_dataset(c.id);
  return api_error(errc::conflict,
                   fmt::format("queued or running jobs use the dataset ({}); cancel them first",
                               users.empty() ? std::string("-") : fmt::format("{}", fmt::join(users, ", "))),
                   "id");
}

std::optional<Error> resolve_dataset_lengths(Env& env, json& doc) {
  for (const char* where : {"/workload/prompt_tokens", "/workload/output_tokens", "/workload/dataset/output_tokens"}) {
    const json::json_pointer ptr(where);
    if (!doc.contains(ptr)) continue;
    json& d = doc[ptr];
    if (!d.is_object() || d.value("dist", "") != "empirical" || !d.contains("dataset")) continue;
    const std::string field = where;
    // A stored spec sent again: the histogram is there already, the dataset its provenance.
    if (d.contains("values")) continue;
    if (d.contains("csv")) {
      return Error{errc::invalid_argument, "give the lengths once: csv or a dataset", field + "/dataset"};
    }
    if (!d["dataset"].is_string() || !llm::is_dataset_id(d["dataset"].get<std::string>())) {
      return Error{errc::invalid_argument, "must be a dataset id like ds-0123456789abcdef", field + "/dataset"};
    }
    const std::string id = d["dataset"];
    const bool prompt_side = field == "/workload/prompt_tokens";
    const std::string which = d.contains("field") && d["field"].is_string() ? d["field"].get<std::string>()
                                                                            : (prompt_side ? "prompt" : "output");
    if (which != "prompt" && which != "output") {
      return Error{errc::invalid_argument, "must be prompt or output", field + "/field"};
    }
    auto row = env.ctx.store->dataset(id);
    auto content = row ? env.ctx.store->dataset_content(id) : std::nullopt;
    if (!row || !content) return no_dataset_at(id, field + "/dataset");
    auto parsed =
        llm::parse_dataset(llm::parse_dataset_format(row->format).value_or(llm::DatasetFormat::jsonl), *content);
    if (!parsed)
      return Error{errc::invalid_argument, fmt::format("dataset {} no longer parses", id), field + "/dataset"};
    const auto lengths = llm::dataset_lengths(
        parsed->entries, which == "prompt" ? llm::DatasetLength::prompt : llm::DatasetLength::output);
    if (lengths.empty()) {
      return Error{errc::invalid_argument, fmt::format("dataset {} gives no {} lengths", id, which), field + "/field"};
    }
    std::map<std::uint32_t, std::uint64_t> counts;
    for (auto v : lengths) ++counts[v];
    json values = json::array(), weights = json::array();
    for (const auto& [v, n] : counts) {
      values.push_back(v);
      weights.push_back(n);
    }
    d["values"] = std::move(values);
    d["weights"] = std::move(weights);
    d["field"] = which;
    d["sha256"] = row->sha256;
  }
  return std::nullopt;
}

}  // namespace capsweep::api
