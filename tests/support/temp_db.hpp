#pragma once
// A fresh database path under the temp dir, removed (with -wal, -shm and the lock) afterwards.

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace capsweep::testing {

struct TempDb {
  std::filesystem::path path;
  explicit TempDb(const std::string& tag = "test") {
    path = std::filesystem::temp_directory_path() / ("capsweep-" + tag + "-" + std::to_string(::getpid()) + "-" +
                                                     std::to_string(reinterpret_cast<std::uintptr_t>(this)) + ".db");
    clean();
  }
  ~TempDb() { clean(); }
  TempDb(const TempDb&) = delete;
  TempDb& operator=(const TempDb&) = delete;
  void clean() {
    for (const char* suffix : {"", "-wal", "-shm", ".lock"}) std::filesystem::remove(path.string() + suffix);
  }
};

}  // namespace capsweep::testing
