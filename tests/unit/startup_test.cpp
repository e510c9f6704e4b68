// capsweepd's start-up settings: flags over the config file, and what refuses to start.
#include "api/startup.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

using namespace capsweep::api;

namespace {

std::variant<Startup, int> start(std::vector<std::string> args) {
  args.insert(args.begin(), "capsweepd");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return startup_from_command_line(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("startup: flags override the config file and defaults fill the rest") {
  const auto path =
      std::filesystem::temp_directory_path() / ("capsweepd-startup-" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << R"({"listen": "127.0.0.1:9001", "db": "from-file.db", "max_concurrent_sweeps": 3})";
  auto s =
      start({"--config", path.string(), "--listen", "127.0.0.1:9002", "--allow-targets", "10.0.0.0/8,,llm.internal"});
  std::filesystem::remove(path);
  REQUIRE(std::holds_alternative<Startup>(s));
  const auto& st = std::get<Startup>(s);
  CHECK(st.config.listen == "127.0.0.1:9002");
  CHECK(st.endpoint.port() == 9002);
  CHECK(st.config.db == "from-file.db");
  CHECK(st.config.max_concurrent_sweeps == 3);
  CHECK(st.config.allow.allows("10.1.2.3"));
  CHECK(st.config.allow.allows("llm.internal"));
  CHECK_FALSE(st.config.allow.allows("127.0.0.1"));
  const auto mo = manager_options(st.config);
  CHECK(mo.allow_host("10.9.9.9"));
  CHECK_FALSE(mo.allow_host("192.168.0.1"));
  const auto so = server_options(st.config);
  CHECK(so.max_connections == 512);
  CHECK(so.header_timeout == std::chrono::seconds(10));
}

TEST_CASE("startup: --tokens-file replaces the config file's tokens, and a bad one refuses to start") {
  const auto dir = std::filesystem::temp_directory_path();
  const auto tokens = dir / ("capsweepd-tokens-" + std::to_string(::getpid()) + ".json");
  std::ofstream(tokens) << R"([{"token": "0123456789abcdef0123", "role": "submit", "name": "ci"}])";
  auto s = start({"--listen", "0.0.0.0:8080", "--tokens-file", tokens.string()});
  REQUIRE(std::holds_alternative<Startup>(s));
  const auto& c = std::get<Startup>(s).config;
  REQUIRE(c.tokens.size() == 1);
  CHECK(c.tokens[0].token == "0123456789abcdef0123");
  CHECK(c.tokens[0].name == "ci");
  std::ofstream(tokens) << R"({"token": "0123456789abcdef0123"})";  // not an array
  CHECK(std::get<int>(start({"--tokens-file", tokens.string()})) == 2);
  std::ofstream(tokens) << R"([{"token": "short", "role": "read"}])";  // fails the schema
  CHECK(std::get<int>(start({"--tokens-file", tokens.string()})) == 2);
  std::filesystem::remove(tokens);
  CHECK(std::get<int>(start({"--tokens-file", tokens.string()})) == 2);  // missing
}

TEST_CASE("startup: what refuses to start, with the exit code") {
  CHECK(std::get<int>(start({"--bogus"})) == 2);
  CHECK(std::get<int>(start({"--config", "/nonexistent/capsweepd.json"})) == 2);
  CHECK(std::get<int>(start({"--listen", "not-an-address"})) == 2);
  CHECK(std::get<int>(start({"--max-concurrent-sweeps", "0"})) == 2);
  CHECK(std::get<int>(start({"--log-format", "xml"})) == 2);
  // A non-loopback address without tokens needs the explicit flag.
  CHECK(std::get<int>(start({"--listen", "0.0.0.0:8080"})) == 2);
  auto open = start({"--listen", "0.0.0.0:8080", "--insecure-no-auth"});
  REQUIRE(std::holds_alternative<Startup>(open));
  CHECK(std::get<Startup>(open).config.insecure_no_auth);
  CHECK(std::holds_alternative<Startup>(start({"--listen", "[::1]:8080"})));
  CHECK(std::get<int>(start({"--help"})) == 0);
}
