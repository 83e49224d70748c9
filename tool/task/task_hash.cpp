// A task's hashes (task.h): the task's own, and its reference's (the source with the project headers
// it includes, each preprocessed without macro expansion and whitespace-collapsed).
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/hash.h"
#include "common/process.h"
#include "task/task.h"

namespace kevo {

std::string Task::hash() const {
    nlohmann::json j = to_json();
    j["reference"].erase("source");  // where the file lives does not change the task; its content is hashed separately
    j["reference"].erase("show");     // what the LLM is shown, not what a kernel computes
    j["tolerance"].erase("policy");   // how the bar was chosen, not the bar
    // The values of a file input are part of the task.
    for (size_t i = 0; i < inputs.size(); ++i)
        if (inputs[i].init.kind == "file") j["inputs"][i]["init"]["sha256"] = inputs[i].init.file_sha256;
    return sha256_hex(j.dump());
}

namespace {
// Runs of spaces, tabs and line breaks become one space; no space at either end.
std::string collapse_whitespace(const std::string& text) {
    std::string out;
    bool space = false;
    for (char c : text) {
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
            space = true;
            continue;
        }
        if (space && !out.empty()) out += ' ';
        space = false;
        out += c;
    }
    return out;
}

// Most seconds one preprocessing may take: only a limit for a compiler that hangs (on a loaded
// machine a -MM of a LibTorch reference takes seconds; CMake's side of the hash waits without one).
constexpr double kCxxLimitS = 900;

// The compiler's verdict: ok, or it could not read the file (no compiler, or it exited with an
// error: the caller falls back to the byte hash, as CMake's side does). A run that did not end by
// itself (killed at the limit, or by a signal) gives no verdict: falling back then would make the
// hash depend on the machine's load, so it is an error.
ProcessResult run_cxx(std::vector<std::string> args, const std::filesystem::path& cwd, const std::filesystem::path& source) {
    ProcessOptions o;
    o.argv = {"c++"};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.cwd = cwd;
    o.timeout_s = kCxxLimitS;
    ProcessResult r = run_process(o);
    if (r.started && (r.timed_out || r.term_signal != 0))
        throw UsageError("hashing the reference " + source.string() + ": 'c++ " + args.front() + "' did not finish (" +
                         r.describe() + "), so its hash cannot be computed; run the command again");
    return r;
}
}  // namespace

std::string Task::reference_file_hash() const { return sha256_file(reference_source); }

std::string Task::reference_hash() const {
    std::string h = reference_source_hash();
    // The setup argument (e.g. a TorchScript model) is part of the reference.
    if (!reference_arg.empty()) h = sha256_hex(h + "\x1e" + sha256_file(reference_arg));
    return h;
}

std::string Task::reference_source_hash() const {
    namespace fs = std::filesystem;
    const fs::path dir = reference_source.parent_path();
    // The headers it includes from the project: the compiler's dependency list (-MM leaves out
    // system headers; -MG lets a missing <ATen/...> pass).
    ProcessResult deps = run_cxx({"-MM", "-MG", "-w", "-I" + dir.string(), reference_source.string()}, dir, reference_source);
    if (!deps.ok()) return reference_file_hash();
    std::string rule = deps.out.substr(deps.out.find(':') == std::string::npos ? 0 : deps.out.find(':') + 1);
    std::vector<std::pair<std::string, fs::path>> files;  // (path relative to the reference's folder, path)
    size_t pos = 0;
    while (pos < rule.size()) {
        while (pos < rule.size() && (std::isspace(static_cast<unsigned char>(rule[pos])) || rule[pos] == '\\')) ++pos;
        size_t end = pos;
        while (end < rule.size() && !std::isspace(static_cast<unsigned char>(rule[end]))) ++end;
        if (end == pos) break;
        fs::path p(rule.substr(pos, end - pos));
        pos = end;
        if (p.is_relative()) p = dir / p;
        p = p.lexically_normal();
        std::error_code ec;
        if (p == reference_source || !fs::is_regular_file(p, ec)) continue;
        files.emplace_back(p.lexically_relative(dir).generic_string(), p);
    }
    std::sort(files.begin(), files.end());
    files.erase(std::unique(files.begin(), files.end()), files.end());
    auto canonical = [&](const fs::path& file, std::string& out) {
        ProcessResult r = run_cxx({"-fpreprocessed", "-dD", "-E", "-P", "-w", file.string()}, dir, reference_source);
        if (!r.ok()) return false;
        out = collapse_whitespace(r.out);
        return true;
    };
    std::string text, part;
    if (!canonical(reference_source, part)) return reference_file_hash();
    text = "kevo-reference-1\n" + part;
    for (const auto& [rel, path] : files) {
        if (!canonical(path, part)) return reference_file_hash();
        text += "\n" + rel + "\n" + part;
    }
    return sha256_hex(text);
}

}  // namespace kevo
