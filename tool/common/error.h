// Error types shared by every part of the tool. Their messages are user-facing.
#pragma once
#include <stdexcept>
#include <string>

namespace kevo {

// Bad command-line usage or a broken task/setup. The CLI maps it to exit code 2.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A broken task file: names the file and the offending field.
struct TaskError : UsageError {
    TaskError(std::string file, std::string field, const std::string& message)
        : UsageError(file + ": " + (field.empty() ? std::string() : field + ": ") + message),
          file_(std::move(file)), field_(std::move(field)) {}
    const std::string& file() const { return file_; }
    const std::string& field() const { return field_; }

private:
    std::string file_, field_;
};

}  // namespace kevo
