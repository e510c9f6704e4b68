#include "lengths.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "core/lengths.hpp"
#include "core/text.hpp"
#include "llm/dataset.hpp"

namespace capsweep::cli {

namespace {

using json = nlohmann::json;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> cells_of(std::string_view line) {
  std::vector<std::string_view> out;
  for (;;) {
    const auto comma = line.find(',');
    out.push_back(trim(line.substr(0, comma)));
    if (comma == std::string_view::npos) return out;
    line.remove_prefix(comma + 1);
  }
}

std::optional<std::uint32_t> count_of(std::string_view cell) {
  std::uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
  if (ec != std::errc() || ptr != cell.data() + cell.size() || v < 1 || v > llm::kMaxDatasetTokens) return std::nullopt;
  return static_cast<std::uint32_t>(v);
}

std::string lowered(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Result<FileLengths> read_csv(std::string_view text) {
  FileLengths out;
  std::optional<std::size_t> prompt_col = 0, output_col = 1;
  std::optional<Error> failure;
  bool first = true;
  for_each_line(text, [&](std::string_view raw, std::size_t line_no) {
    const std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#') return true;
    const auto cells = cells_of(line);
    if (first) {
      first = false;
      if (!count_of(cells[0])) {  // a header: find the columns by name
        prompt_col.reset();
        output_col.reset();
        for (std::size_t i = 0; i < cells.size(); ++i) {
          const std::string name = lowered(cells[i]);
          if (!prompt_col && (name.find("prompt") != std::string::npos || name.find("input") != std::string::npos))
            prompt_col = i;
          else if (!output_col &&
                   (name.find("output") != std::string::npos || name.find("completion") != std::string::npos))
            output_col = i;
        }
        if (!prompt_col && !output_col) {
          failure = Error{errc::parse_error,
                          fmt::format("line {}: a header must name a prompt (or input) or an output (or completion) "
                                      "column",
                                      line_no),
                          fmt::format("line {}", line_no)};
          return false;
        }
        return true;
      }
    }
    auto take = [&](std::optional<std::size_t> col, std::vector<std::uint32_t>& into, const char* what) {
      if (!col || *col >= cells.size()) return true;
      auto v = count_of(cells[*col]);
      if (!v) {
        failure = Error{errc::parse_error,
                        fmt::format("line {}: the {} length '{}' is not a whole number of tokens in [1, {}]", line_no,
                                    what, printable_ascii(cells[*col], 40), llm::kMaxDatasetTokens),
                        fmt::format("line {}", line_no)};
        return false;
      }
      into.push_back(*v);
      return true;
    };
    return take(prompt_col, out.prompt, "prompt") && take(output_col, out.output, "output");
  });
  if (failure) return *failure;
  if (out.prompt.empty() && out.output.empty()) return Error{errc::parse_error, "the file holds no lengths", ""};
  return out;
}

json summary_of(std::vector<std::uint32_t> counts, std::size_t bins) {
  auto fit = fit_lengths(std::move(counts), bins);
  if (!fit) return nullptr;
  json blocks = length_fit_blocks(*fit);
  return {{"items", fit->count},
          {"p50", fit->p50},
          {"p95", fit->p95},
          {"max", fit->max},
          {"lognormal", blocks["lognormal"]},
          {"empirical", blocks["empirical"]}};
}

}  // namespace

Result<FileLengths> read_lengths(std::string_view text) {
  const std::string_view body = trim(text);
  if (body.empty()) return Error{errc::parse_error, "the file is empty", ""};
  if (body.front() != '[' && body.front() != '{') return read_csv(text);
  auto d = llm::parse_dataset(llm::sniff_dataset_format(text), text);
  if (!d) return d.error();
  return FileLengths{llm::dataset_lengths(d->entries, llm::DatasetLength::prompt),
                     llm::dataset_lengths(d->entries, llm::DatasetLength::output)};
}

json lengths_summary(const FileLengths& lengths, std::size_t bins) {
  json out = json::object();
  if (!lengths.prompt.empty()) out["prompt_tokens"] = summary_of(lengths.prompt, bins);
  if (!lengths.output.empty()) out["output_tokens"] = summary_of(lengths.output, bins);
  return out;
}

std::string lengths_text(const json& summary) {
  std::string out;
  for (const auto& [key, s] : summary.items()) {
    const json& ln = s["lognormal"];
    out += fmt::format("{:<14} {} items  p50 {:.1f}  p95 {:.1f}  max {}", key, s["items"].get<std::size_t>(),
                       s["p50"].get<double>(), s["p95"].get<double>(), s["max"].get<std::uint32_t>());
    if (ln.value("dist", "") == "lognormal")
      out += fmt::format("   fitted lognormal: median {}, p95 {}\n", ln["median"].dump(), ln["p95"].dump());
    else
      out += "   every length the same\n";
  }
  for (const char* kind : {"lognormal", "empirical"}) {
    out += fmt::format("\n{} (paste into \"workload\"):\n",
                       std::string_view(kind) == "lognormal" ? "fitted log-normal" : "empirical histogram");
    bool first = true;
    for (const auto& [key, s] : summary.items()) {
      out += fmt::format("{}  \"{}\": {}", first ? "" : ",\n", key, s[kind].dump());
      first = false;
    }
    out += "\n";
  }
  return out;
}

}  // namespace capsweep::cli
