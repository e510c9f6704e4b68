#include "loadgen/calibrate.hpp"

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "core/log.hpp"
#include "llm/client.hpp"
#include "llm/workload.hpp"

namespace capsweep::loadgen {

namespace asio = boost::asio;

namespace {

// The tokens per word a target's count gives, when it is believable; else 1, with why in `how`.
double believed(double ratio, std::uint32_t words, std::string& how) {
  if (!(ratio > 0)) {
    how = "none (assumed 1 token per word)";
    return 1.0;
  }
  // No tokenizer gives 50 tokens a word or one token for 20 words of this text: a count like
  // that is the server's error, and prompts sized by it would not be the spec's.
  if (!(ratio >= 0.05 && ratio <= 50)) {
    how = fmt::format("none ({} said {:.4g} tokens for {} words, not believable; assumed 1 token per word)", how,
                      ratio * words, words);
    return 1.0;
  }
  return ratio;
}

}  // namespace

double calibrate_tokens_per_word(const llm::Target& given, std::string& how, const std::function<bool()>& should_stop) {
  constexpr std::uint32_t kWords = 500;
  const std::string text = llm::PromptSynth::calibration_text(kWords);
  // Calibration is two short requests: bounded well below a step's timeouts, and abandoned
  // at once when the sweep is cancelled or the service stops.
  llm::Target target = given;
  target.request_timeout = std::min<Nanos>(target.request_timeout, std::chrono::seconds(30));
  target.read_timeout = std::min<Nanos>(target.read_timeout, std::chrono::seconds(30));
  asio::io_context io(1);
  llm::Client client(io.get_executor(), target);
  const nlohmann::json tok{{"model", target.model}, {"prompt", text}};
  const auto r = client.request_now(io, "POST", "/tokenize", tok.dump(), "calibration", should_stop);
  if (r.status == 200) {
    const auto j = nlohmann::json::parse(r.body, nullptr, false);
    if (j.is_object() && j.contains("count") && j["count"].is_number()) {
      how = "/tokenize";
      return believed(j["count"].get<double>() / kWords, kWords, how);
    }
  }
  if (should_stop && should_stop()) return believed(0, kWords, how);
  llm::Target plain = target;
  plain.stream = false;
  const std::string body = llm::completion_body(plain, text, 1);
  const auto c = client.request_now(io, "POST", target.completion_path().substr(target.base_path.size()), body,
                                    "calibration", should_stop);
  double ratio = 0;
  if (c.status == 200) {
    const auto j = nlohmann::json::parse(c.body, nullptr, false);
    if (j.is_object() && j.contains("usage") && j["usage"].is_object() && j["usage"].contains("prompt_tokens") &&
        j["usage"]["prompt_tokens"].is_number()) {
      ratio = j["usage"]["prompt_tokens"].get<double>() / kWords;
      how = "usage.prompt_tokens";
    }
  }
  return believed(ratio, kWords, how);
}

}  // namespace capsweep::loadgen
