#pragma once
// Scrapes a target's Prometheus /metrics on a thread of its own while a step runs, every
// `interval`, into ServerGauges; or, with a Prometheus server as the source, sends its instant
// queries at the same pace. Only the class of a failure is kept, never what the answer said
// (a URL aimed at another service must not read its bytes back through the API); a
// Prometheus server's own error message is kept.

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <string>
#include <thread>

#include "core/time.hpp"
#include "llm/client.hpp"
#include "llm/target.hpp"
#include "observe/prom_query.hpp"
#include "observe/server_gauges.hpp"

namespace capsweep::observe {

class Scraper {
 public:
  // `metrics_url` is scraped under the limits of `limits_from` (its address allow-list and
  // response cap); points are stamped as offsets from `origin`. Nothing runs until start().
  Scraper(std::string metrics_url, const llm::Target& limits_from, Nanos interval, SteadyClock::time_point origin);
  // The same, reading the gauges from a Prometheus server's HTTP API.
  Scraper(PromSource source, const llm::Target& limits_from, Nanos interval, SteadyClock::time_point origin);
  ~Scraper();  // stops
  Scraper(const Scraper&) = delete;
  Scraper& operator=(const Scraper&) = delete;

  void start();
  // Ends the scraping (within ~50 ms, or a request's own deadline) and hands over what it saw.
  ServerGauges stop();

 private:
  void run();
  // One reading of every query of prom_ (a failure recorded instead when one fails).
  boost::asio::awaitable<void> query_once(llm::Client& client, const std::string& base_path);

  std::string url_;
  PromSource prom_;  // queries empty: scrape url_ as metrics text
  llm::Target limits_;
  Nanos interval_;
  SteadyClock::time_point origin_;
  std::atomic<bool> running_{false};
  ServerGauges gauges_;  // written by the scraping thread only, until stop() joins it
  std::thread thread_;
};

}  // namespace capsweep::observe
