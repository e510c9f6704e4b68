#include "observe/prometheus.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>

#include "core/text.hpp"

namespace capsweep::observe {
namespace {

bool name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}
bool name_char(char c) {
  return name_start(c) || std::isdigit(static_cast<unsigned char>(c));
}

struct LineParser {
  std::string_view s;
  std::size_t pos = 0;
  std::size_t line_no = 0;
  std::string error;

  bool fail(std::string what) {
    error = std::move(what);
    return false;
  }
  void ws() {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t')) ++pos;
  }
  bool name(std::string& out, bool metric) {
    const std::size_t start = pos;
    if (pos >= s.size() ||
        !(metric ? name_start(s[pos]) : (std::isalpha(static_cast<unsigned char>(s[pos])) || s[pos] == '_'))) {
      return fail(metric ? "expected a metric name" : "expected a label name");
    }
    while (pos < s.size() && (metric ? name_char(s[pos]) : (name_char(s[pos]) && s[pos] != ':'))) ++pos;
    out.assign(s.substr(start, pos - start));
    return true;
  }
  bool label_value(std::string& out) {
    if (pos >= s.size() || s[pos] != '"') return fail("expected '\"' to open a label value");
    ++pos;
    out.clear();
    while (pos < s.size()) {
      const char c = s[pos++];
      if (c == '"') return true;
      if (c == '\\') {
        if (pos >= s.size()) break;
        const char e = s[pos++];
        if (e == 'n')
          out.push_back('\n');
        else if (e == '\\' || e == '"')
          out.push_back(e);
        else
          return fail(fmt::format("unknown escape '\\{}' in a label value", e));
      } else {
        out.push_back(c);
      }
    }
    return fail("unterminated label value");
  }
  bool labels(Sample& sample) {
    ++pos;  // '{'
    for (;;) {
      ws();
      if (pos < s.size() && s[pos] == '}') {
        ++pos;
        return true;
      }
      std::string key, value;
      if (!name(key, false)) return false;
      ws();
      if (pos >= s.size() || s[pos] != '=') return fail("expected '=' after a label name");
      ++pos;
      ws();
      if (!label_value(value)) return false;
      sample.labels.emplace_back(std::move(key), std::move(value));
      ws();
      if (pos < s.size() && s[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < s.size() && s[pos] == '}') {
        ++pos;
        return true;
      }
      return fail("expected ',' or '}' in the label set");
    }
  }
  bool number(double& out) {
    const std::size_t start = pos;
    while (pos < s.size() && s[pos] != ' ' && s[pos] != '\t') ++pos;
    std::string_view t = s.substr(start, pos - start);
    if (t == "NaN" || t == "nan") {
      out = std::numeric_limits<double>::quiet_NaN();
      return true;
    }
    if (t == "+Inf" || t == "Inf" || t == "+inf" || t == "inf") {
      out = std::numeric_limits<double>::infinity();
      return true;
    }
    if (t == "-Inf" || t == "-inf") {
      out = -std::numeric_limits<double>::infinity();
      return true;
    }
    if (!t.empty() && t.front() == '+') t.remove_prefix(1);
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
    if (t.empty() || ec != std::errc() || p != t.data() + t.size()) {
      return fail(fmt::format("'{}' is not a number", s.substr(start, pos - start)));
    }
    return true;
  }
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::optional<std::string_view> Sample::label(std::string_view key) const {
  for (const auto& [k, v] : labels) {
    if (k == key) return std::string_view(v);
  }
  return std::nullopt;
}

std::optional<double> Exposition::sum(std::string_view name,
                                      const std::vector<std::pair<std::string, std::string>>& match) const {
  std::optional<double> total;
  for (const auto& smp : samples) {
    if (smp.name != name) continue;
    bool ok = true;
    for (const auto& [k, v] : match) {
      auto l = smp.label(k);
      if (!l || *l != v) {
        ok = false;
        break;
      }
    }
    if (ok) total = total.value_or(0) + smp.value;
  }
  return total;
}

namespace {
std::optional<Error> parse_line(Exposition& out, std::string_view line, std::size_t line_no);
}  // namespace

Result<Exposition> parse_prometheus_text(std::string_view text) {
  Exposition out;
  std::optional<Error> failure;
  for_each_line(text, [&](std::string_view line, std::size_t line_no) {
    if (auto e = parse_line(out, line, line_no)) {
      failure = std::move(*e);
      return false;
    }
    return true;
  });
  if (failure) return *failure;
  return out;
}

namespace {

// A metrics line's error, naming the line.
Error line_error(std::size_t line_no, const std::string& what) {
  return Error{errc::parse_error, fmt::format("metrics line {}: {}", line_no, what), ""};
}

// A "#" line from `p.pos` (after the '#'): HELP or TYPE of a family, else a plain comment.
std::optional<Error> parse_comment(Exposition& out, LineParser& p, std::size_t line_no) {
  p.ws();
  const std::string_view rest = p.s.substr(p.pos);
  auto keyword = [&](std::string_view k) {
    return rest.substr(0, 4) == k && (rest.size() == 4 || rest[4] == ' ' || rest[4] == '\t');
  };
  const bool is_help = keyword("HELP");
  const bool is_type = keyword("TYPE");
  if (!is_help && !is_type) return std::nullopt;  // a plain comment
  p.pos += 4;
  p.ws();
  std::string family;
  if (!p.name(family, true)) return line_error(line_no, p.error);
  p.ws();
  std::string value(p.s.substr(p.pos));
  if (is_type) {
    if (value != "counter" && value != "gauge" && value != "histogram" && value != "summary" && value != "untyped" &&
        value != "unknown" && value != "info" && value != "stateset" && value != "gaugehistogram") {
      return line_error(line_no, fmt::format("unknown metric type '{}'", value));
    }
    out.types[family] = std::move(value);
  } else {
    out.help[family] = std::move(value);
  }
  return std::nullopt;
}

// A sample line from `p.pos`: name, labels, value and an optional timestamp.
std::optional<Error> parse_sample(Exposition& out, LineParser& p, std::size_t line_no) {
  const std::string_view line = p.s;
  Sample smp;
  if (!p.name(smp.name, true)) return line_error(line_no, p.error);
  p.ws();
  if (p.pos < line.size() && line[p.pos] == '{' && !p.labels(smp)) return line_error(line_no, p.error);
  p.ws();
  if (p.pos >= line.size()) return line_error(line_no, "a sample needs a value");
  if (!p.number(smp.value)) return line_error(line_no, p.error);
  p.ws();
  if (p.pos < line.size()) {
    double ts = 0;
    if (!p.number(ts) || !std::isfinite(ts) || std::abs(ts) > 9.2e18) {
      return line_error(line_no, "the timestamp is not a number of milliseconds");
    }
    smp.timestamp_ms = static_cast<std::int64_t>(ts);
    p.ws();
    if (p.pos < line.size()) return line_error(line_no, "unexpected text after the timestamp");
  }
  if (ends_with(smp.name, "_created")) return std::nullopt;
  out.samples.push_back(std::move(smp));
  return std::nullopt;
}

std::optional<Error> parse_line(Exposition& out, std::string_view line, std::size_t line_no) {
  LineParser p;
  p.s = line;
  p.ws();
  if (p.pos == line.size()) return std::nullopt;
  if (line[p.pos] == '#') {
    ++p.pos;
    return parse_comment(out, p, line_no);
  }
  return parse_sample(out, p, line_no);
}

}  // namespace

}  // namespace capsweep::observe
