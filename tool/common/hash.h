// Content hashes (SHA-256, hex) used for caches and staleness checks.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

namespace kevo {
std::string sha256_hex(std::string_view data);
// Throws UsageError when the file cannot be read.
std::string sha256_file(const std::filesystem::path& path);
}  // namespace kevo
