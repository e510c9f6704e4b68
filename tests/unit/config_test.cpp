#include "api/config.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace capsweep::api;
using json = nlohmann::json;

TEST_CASE("config: defaults bind loopback, allow loopback targets only, no tokens") {
  const ServiceConfig c = default_config();
  CHECK(c.listen == "127.0.0.1:8080");
  CHECK(c.tokens.empty());
  CHECK(c.max_concurrent_sweeps == 1);
  CHECK(c.allow.allows("127.0.0.1"));
  CHECK(c.allow.allows("127.1.2.3"));
  CHECK(c.allow.allows("::1"));
  CHECK(c.allow.allows("[::1]"));
  CHECK(c.allow.allows("localhost"));
  CHECK(c.allow.allows("LOCALHOST"));
  CHECK_FALSE(c.allow.allows("10.0.0.1"));
  CHECK_FALSE(c.allow.allows("example.com"));
  CHECK_FALSE(c.allow.allows("::2"));
  CHECK(c.limits.max_body_bytes == 1048576);
}

TEST_CASE("config: values from the file, CIDR blocks and names") {
  const json doc = {
      {"listen", "0.0.0.0:9000"},
      {"tokens",
       {{{"token", "0123456789abcdef-r"}, {"role", "read"}}, {{"token", "0123456789abcdef-s"}, {"role", "submit"}}}},
      {"allow_targets", {"10.1.0.0/16", "fd00::/8", "vllm.internal", "192.168.1.7"}},
      {"max_concurrent_sweeps", 4},
      {"limits", {{"max_rate_rps", 50}, {"max_queued_sweeps", 3}}}};
  const ServiceConfig c = parse_config(doc).value();
  CHECK(c.listen == "0.0.0.0:9000");
  REQUIRE(c.tokens.size() == 2);
  CHECK_FALSE(c.tokens[0].can_submit);
  CHECK(c.tokens[1].can_submit);
  CHECK(c.max_concurrent_sweeps == 4);
  CHECK(c.limits.max_rate_rps == 50);
  CHECK(c.limits.max_queued_sweeps == 3);
  CHECK(c.limits.max_step_duration_s == 3600);  // default kept
  CHECK(c.allow.allows("10.1.255.4"));
  CHECK_FALSE(c.allow.allows("10.2.0.1"));
  CHECK(c.allow.allows("fd12::1"));
  CHECK(c.allow.allows("vllm.internal"));
  CHECK(c.allow.allows("192.168.1.7"));
  CHECK_FALSE(c.allow.allows("192.168.1.8"));
  CHECK_FALSE(c.allow.allows("127.0.0.1"));  // the list replaces the default
}

TEST_CASE("config: an IPv4-mapped IPv6 address is judged as the IPv4 address it holds") {
  const ServiceConfig v6only = parse_config(json{{"allow_targets", {"::1/128"}}}).value();
  CHECK_FALSE(v6only.allow.allows("::ffff:127.0.0.1"));  // not ::1, and no IPv4 entry covers it
  CHECK_FALSE(v6only.allow.allows("[::ffff:127.0.0.1]"));
  const ServiceConfig v4 = parse_config(json{{"allow_targets", {"127.0.0.0/8"}}}).value();
  CHECK(v4.allow.allows("[::ffff:127.0.0.1]"));
  CHECK(v4.allow.allows("::ffff:7f00:1"));
  CHECK_FALSE(v4.allow.allows("::ffff:10.0.0.1"));
  CHECK_FALSE(v4.allow.allows("::ffff:ffff:127.0.0.1"));
}

TEST_CASE("config: hardening settings have safe defaults and are read from the file") {
  const ServiceConfig d = default_config();
  CHECK(d.limits.max_json_depth == 64);
  CHECK(d.limits.max_requests_per_step == 1'000'000);
  CHECK(d.allowed_hosts.entries().empty());
  CHECK(d.tls_ca_dir.empty());
  CHECK_FALSE(d.insecure_no_auth);
  CHECK(d.retention.max_age_days == 0);
  const ServiceConfig c = parse_config(json{{"allowed_hosts", {"capsweep.example"}},
                                            {"retention", {{"max_sweeps", 100}}},
                                            {"limits", {{"max_json_depth", 16}, {"max_prompt_tokens", 4096}}}})
                              .value();
  CHECK(c.allowed_hosts.entries() == std::vector<std::string>{"capsweep.example"});
  CHECK(c.retention.max_sweeps == 100);
  CHECK(c.limits.max_json_depth == 16);
  CHECK(c.limits.max_prompt_tokens == 4096);
  CHECK_FALSE(parse_config(json{{"limits", {{"max_json_depth", 1}}}}).has_value());
  CHECK_FALSE(parse_config(json{{"retention", {{"max_sweeps", -1}}}}).has_value());
}

TEST_CASE("config: errors name the field") {
  CHECK(parse_config({{"listen", 5}}).error().field == "/listen");
  CHECK(parse_config({{"bogus", 1}}).error().field == "/bogus");
  CHECK(parse_config({{"tokens", {{{"token", "short"}, {"role", "read"}}}}}).error().field == "/tokens/0/token");
  CHECK(parse_config({{"tokens", {{{"token", "0123456789abcdef"}, {"role", "admin"}}}}}).error().field ==
        "/tokens/0/role");
  CHECK(parse_config({{"allow_targets", {"10.0.0.0/40"}}}).error().field == "/allow_targets/0");
  CHECK(parse_config({{"allow_targets", {"ok.host", "bad host"}}}).error().field == "/allow_targets/1");
  CHECK(parse_config({{"allowed_hosts", {"capsweep.example", "10.0.0.0/33"}}}).error().field == "/allowed_hosts/1");
  CHECK(parse_config({{"allowed_hosts", {"evil.example/8"}}}).error().field == "/allowed_hosts/0");
  CHECK(parse_config({{"limits", {{"max_rate_rps", -1}}}}).error().field == "/limits/max_rate_rps");
  CHECK(parse_config({{"max_concurrent_sweeps", 0}}).error().field == "/max_concurrent_sweeps");
}

TEST_CASE("config: engine_threads is the cores it may use by default, a number when given, refused out of range") {
  CHECK(default_config().engine_threads == usable_cores());
  CHECK(usable_cores() >= 1);
  CHECK(parse_config(json{{"engine_threads", 3}}).value().engine_threads == 3);
  CHECK(parse_config(json{{"engine_threads", 0}}).value().engine_threads == usable_cores());
  for (const json& bad : {json(-1), json(257), json(1.5), json("2")}) {
    auto c = parse_config(json{{"engine_threads", bad}});
    REQUIRE_FALSE(c.has_value());
    CHECK(c.error().field == "/engine_threads");
  }
}

TEST_CASE("config: agents.kubernetes is off by default, read from the file, and apply needs an image and a URL") {
  const ServiceConfig d = default_config();
  CHECK_FALSE(d.agent_jobs.apply);
  CHECK(d.agent_jobs.token_file == "/var/run/secrets/kubernetes.io/serviceaccount/token");
  CHECK(d.agent_jobs.secret == "capsweep-agent-token");
  const json k = {{"apply", true},
                  {"api_server", "https://10.0.0.1:6443"},
                  {"namespace", "loadtest"},
                  {"token_file", "/run/token"},
                  {"ca_file", "/run/ca.crt"},
                  {"image", "registry.example/capsweep:0.2.0"},
                  {"server", "http://capsweepd.loadtest.svc:8080"},
                  {"secret", "agents"},
                  {"backoff_per_index", 2}};
  const ServiceConfig c = parse_config({{"agents", {{"kubernetes", k}}}}).value();
  CHECK(c.agent_jobs.apply);
  CHECK(c.agent_jobs.api_server == "https://10.0.0.1:6443");
  CHECK(c.agent_jobs.namespace_ == "loadtest");
  CHECK(c.agent_jobs.token_file == "/run/token");
  CHECK(c.agent_jobs.ca_file == "/run/ca.crt");
  CHECK(c.agent_jobs.image == "registry.example/capsweep:0.2.0");
  CHECK(c.agent_jobs.server == "http://capsweepd.loadtest.svc:8080");
  CHECK(c.agent_jobs.secret == "agents");
  CHECK(c.agent_jobs.secret_key == "token");
  CHECK(c.agent_jobs.backoff_per_index == 2);

  const auto field_of = [&](json patch) {
    json doc = k;
    doc.merge_patch(patch);
    auto r = parse_config({{"agents", {{"kubernetes", doc}}}});
    REQUIRE_FALSE(r.has_value());
    return r.error().field;
  };
  CHECK(field_of({{"image", ""}}) == "/agents/kubernetes/image");
  CHECK(field_of({{"server", ""}}) == "/agents/kubernetes/server");
  CHECK(field_of({{"server", "capsweepd:8080"}}) == "/agents/kubernetes/server");
  CHECK(field_of({{"backoff_per_index", -1}}) == "/agents/kubernetes/backoff_per_index");
  CHECK(field_of({{"token_file", ""}}) == "/agents/kubernetes/token_file");
  CHECK(field_of({{"apply", "yes"}}) == "/agents/kubernetes/apply");
  CHECK(field_of({{"namespaces", "x"}}).rfind("/agents/kubernetes", 0) == 0);
  // Off, nothing else is needed.
  CHECK(parse_config({{"agents", {{"kubernetes", {{"apply", false}}}}}}).has_value());
}
