#include "observe/scraper.hpp"

#include <fmt/format.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "core/text.hpp"
#include "llm/client.hpp"
#include "observe/prometheus.hpp"

namespace capsweep::observe {

namespace asio = boost::asio;

namespace {

// "metrics line 7: '\xff' is not a number" -> "not Prometheus text (metrics line 7)".
std::string parse_failure(const std::string& message) {
  return fmt::format("not Prometheus text ({})", printable_ascii(message.substr(0, message.find(':')), 40));
}

// Every co_spawn here completes through this.
constexpr auto log_exception = [](std::exception_ptr e) { log_escaped("scraper", e); };

}  // namespace

Scraper::Scraper(std::string metrics_url, const llm::Target& limits_from, Nanos interval,
                 SteadyClock::time_point origin)
    : url_(std::move(metrics_url)), limits_(limits_from), interval_(interval), origin_(origin) {}

Scraper::Scraper(PromSource source, const llm::Target& limits_from, Nanos interval, SteadyClock::time_point origin)
    : url_(source.url), prom_(std::move(source)), limits_(limits_from), interval_(interval), origin_(origin) {}

Scraper::~Scraper() {
  static_cast<void>(stop());
}

void Scraper::start() {
  if (thread_.joinable()) return;
  running_ = true;
  thread_ = std::thread([this] { run(); });
}

ServerGauges Scraper::stop() {
  running_ = false;
  if (thread_.joinable()) thread_.join();
  return std::move(gauges_);
}

void Scraper::run() {
  const bool from_prometheus = !prom_.queries.empty();
  auto base =
      llm::parse_base_url(llm::Target{}, url_, from_prometheus ? "/target/prometheus/url" : "/target/metrics_url");
  if (!base) {
    gauges_.add_failure(base.error().message);
    return;
  }
  const std::string path = from_prometheus ? base->base_path : base->base_path.empty() ? "/metrics" : base->base_path;
  base->base_path.clear();
  base->allow_address = limits_.allow_address;
  base->max_response_bytes = limits_.max_response_bytes;
  asio::io_context io(1);
  llm::Client client(io.get_executor(), *base);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
        asio::steady_timer t(io);
        auto next = SteadyClock::now();
        // One scrape of the target's /metrics: every reading, or (the last, after the step)
        // its counters alone, so that deltas span the whole step and the gauges' means only it.
        const auto scrape = [&](bool counters_only) -> asio::awaitable<void> {
          auto r = co_await client.request("GET", path, "");
          if (r.status == 200) {
            auto e = parse_prometheus_text(r.body);
            if (e)
              gauges_.add(SteadyClock::now() - origin_, *e, counters_only);
            else if (!counters_only)
              gauges_.add_failure(parse_failure(e.error().message));
          } else if (!counters_only) {
            gauges_.add_failure(r.status ? fmt::format("HTTP {}", r.status) : printable_ascii(r.body));
          }
        };
        while (running_) {
          if (from_prometheus) {
            co_await query_once(client, path);
          } else {
            co_await scrape(false);
          }
          next += interval_;
          // Sleep in short slices so the end of the step is noticed promptly.
          while (running_ && SteadyClock::now() < next) {
            t.expires_after(std::min<Nanos>(next - SteadyClock::now(), std::chrono::milliseconds(50)));
            co_await t.async_wait(use_tuple);
          }
        }
        if (!from_prometheus) co_await scrape(true);
      },
      log_exception);
  io.run();
}

asio::awaitable<void> Scraper::query_once(llm::Client& client, const std::string& base_path) {
  const auto at = SteadyClock::now() - origin_;
  ServerGauges::Point p{to_s(at), {}, {}, {}, {}, {}, {}, {}, {}};
  for (const auto& [name, promql] : prom_.queries) {
    auto r = co_await client.request("GET", instant_query_path(base_path, promql), "");
    // Prometheus answers a rejected query with 400 or 422 and a JSON error of its own.
    if (r.status != 200 && r.status != 400 && r.status != 422) {
      gauges_.add_failure(r.status ? fmt::format("Prometheus query '{}': HTTP {}", name, r.status)
                                   : printable_ascii(r.body));
      co_return;
    }
    auto v = parse_instant_query(r.body);
    if (!v) {
      gauges_.add_failure(fmt::format("Prometheus query '{}': {}", name, v.error().message));
      co_return;
    }
    std::optional<double>* slot = name == "running"         ? &p.running
                                  : name == "waiting"       ? &p.waiting
                                  : name == "kv_cache"      ? &p.kv_usage
                                  : name == "prompt_tokens" ? &p.prompt_tokens
                                                            : &p.generation_tokens;
    *slot = *v;
  }
  gauges_.add_point(p);
}

}  // namespace capsweep::observe
