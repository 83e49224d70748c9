#include "cache/cache.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <set>
#include <utility>
#include <vector>

#include "common/arch.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "common/text.h"
#include "compile/compile.h"
#include "language/registry.h"
#include "reference/reference.h"

namespace kevo::cache {
namespace fs = std::filesystem;

namespace {

constexpr std::uintmax_t kMaxMetadataBytes = std::uintmax_t{4} << 20;

bool is_identifier(const std::string& s) {
    if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
    return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

double number_or_zero(const nlohmann::json& j, const char* key) {
    return j.contains(key) && j.at(key).is_number() ? j.at(key).get<double>() : 0.0;  // inf/nan travel as null
}

// "" or why `speedup` is not a figure an entry records: a finite number >= 0 (0: none measured).
// kernelevo writes no other; NaN and infinities would travel as null.
std::string speedup_problem(const nlohmann::json& speedup) {
    const bool number = speedup.is_number();
    if (number && speedup.get<double>() >= 0 && std::isfinite(speedup.get<double>())) return "";
    std::string shown = number ? format_double("%g", speedup.get<double>())
                               : speedup.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
    return "speedup " + shown + " is not a figure kernelevo records (a speedup over the reference is a finite " +
           "number > 0, or 0 when none was measured)";
}

template <class T>
T get_or(const nlohmann::json& j, const char* key, T def) {
    if (!j.contains(key) || j.at(key).is_null()) return def;
    return j.at(key).get<T>();
}

// The language `backend` names when its candidate is kept beside the .cu (keeps_source()), else nullptr.
const CandidateLanguage* with_source_file(const std::string& backend) {
    const CandidateLanguage* l = language::named(backend);
    return l && l->keeps_source() ? l : nullptr;
}

// The key of the metadata that holds that language's facts ("" for none).
std::string facts_key(const std::string& backend) {
    const CandidateLanguage* l = with_source_file(backend);
    return l ? l->cache_metadata_key() : "";
}

}  // namespace

// An entry's possible files: the .cu, the .json and every language's candidate source.
static std::vector<fs::path> entry_files(const fs::path& cache_dir, const std::string& function, const std::string& arch) {
    std::vector<fs::path> files = {source_path(cache_dir, function, arch), metadata_path(cache_dir, function, arch)};
    for (const CandidateLanguage* l : language::all())
        if (l->keeps_source()) files.push_back(candidate_source_path(cache_dir, function, arch, *l));
    return files;
}

const char* state_name(State s) {
    switch (s) {
        case State::valid: return "valid";
        case State::missing: return "missing";
        case State::stale: return "stale";
        case State::invalid: return "invalid";
    }
    return "invalid";
}

nlohmann::json EntryMeta::to_json() const {
    nlohmann::json j;
    j["kernelevo_cache_version"] = 1;
    j["function"] = function;
    j["arch"] = arch;
    j["task_hash"] = task_hash;
    j["reference_hash"] = reference_hash;
    j["source_hash"] = source_hash;
    j["origin"] = origin;
    j["validated"] = validated;
    j["speedup"] = speedup;
    j["kernel_us"] = kernel_us;
    j["reference_us"] = reference_us;
    j["validation"] = validation.is_null() ? nlohmann::json::object() : validation;
    j["toolkit"] = toolkit;
    j["gpu"] = gpu;
    j["model"] = model;
    j["libtorch"] = libtorch;
    j["prompt_tokens"] = prompt_tokens;
    j["completion_tokens"] = completion_tokens;
    j["cost_usd"] = cost_usd;
    j["date"] = date;
    j["kernelevo_version"] = kernelevo_version;
    if (!note.empty()) j["note"] = note;
    j["backend"] = backend;
    if (const std::string key = facts_key(backend); !key.empty()) j[key] = facts.is_null() ? nlohmann::json::object() : facts;
    return j;
}

EntryMeta EntryMeta::from_json(const nlohmann::json& j) {
    if (!j.is_object()) throw UsageError("expected a JSON object");
    EntryMeta m;
    try {
        m.function = j.at("function").get<std::string>();
        m.arch = j.at("arch").get<std::string>();
        m.task_hash = j.at("task_hash").get<std::string>();
        m.reference_hash = j.at("reference_hash").get<std::string>();
        m.source_hash = j.at("source_hash").get<std::string>();
        m.origin = get_or<std::string>(j, "origin", "search");
        m.validated = get_or<bool>(j, "validated", true);
        if (j.contains("speedup")) {  // absent (an entry written by hand): none measured
            if (std::string why = speedup_problem(j.at("speedup")); !why.empty()) throw UsageError(why);
            m.speedup = j.at("speedup").get<double>();
        }
        m.kernel_us = get_or<double>(j, "kernel_us", 0);
        m.reference_us = get_or<double>(j, "reference_us", 0);
        m.validation = j.contains("validation") ? j.at("validation") : nlohmann::json::object();
        m.toolkit = get_or<std::string>(j, "toolkit", "");
        m.gpu = get_or<std::string>(j, "gpu", "");
        m.model = get_or<std::string>(j, "model", "");
        m.libtorch = get_or<std::string>(j, "libtorch", "");
        m.prompt_tokens = get_or<int64_t>(j, "prompt_tokens", 0);
        m.completion_tokens = get_or<int64_t>(j, "completion_tokens", 0);
        m.cost_usd = get_or<double>(j, "cost_usd", 0);
        m.date = get_or<std::string>(j, "date", "");
        m.kernelevo_version = get_or<std::string>(j, "kernelevo_version", "");
        m.note = get_or<std::string>(j, "note", "");
        m.backend = get_or<std::string>(j, "backend", "cuda");
        const std::string key = facts_key(m.backend);
        m.facts = !key.empty() && j.contains(key) ? j.at(key) : nlohmann::json();
    } catch (const nlohmann::json::exception& e) {
        throw UsageError(e.what());
    }
    return m;
}

std::string kept_out(const EntryMeta& m, double min_speedup) {
    // The minimum applies to measured speedups only: none recorded (0) is the user's choice to use it.
    if (!(m.speedup > 0) || m.speedup >= min_speedup) return "";
    return format_double("measured %.3gx over its reference: ", m.speedup) +
           format_double("below the minimum speedup %g", min_speedup);
}

EntryMeta entry_from_validation(const Task& task, const std::string& arch, const nlohmann::json& validation) {
    EntryMeta m;
    m.function = task.name;
    m.arch = normalize_arch(arch);
    m.task_hash = task.hash();
    m.reference_hash = task.reference_hash();
    m.validation = validation.is_object() ? validation : nlohmann::json::object();
    m.validated = m.validation.value("status", std::string()) == "ok";
    m.speedup = number_or_zero(m.validation, "speedup");
    m.kernel_us = number_or_zero(m.validation, "kernel_us");
    m.reference_us = number_or_zero(m.validation, "reference_us");
    if (m.validation.contains("gpu") && m.validation.at("gpu").is_string()) m.gpu = m.validation.at("gpu").get<std::string>();
    // With --workers, the toolkit of the worker that compiled it (this host may have no nvcc).
    if (m.validation.contains("toolkit") && m.validation.at("toolkit").is_string()) m.toolkit = m.validation.at("toolkit").get<std::string>();
    if (m.toolkit.empty()) {
        try {
            m.toolkit = nvcc_version(CompileOptions{});
        } catch (const std::exception&) {
            m.toolkit = "";  // no nvcc here (an --unvalidated entry from a CPU machine)
        }
    }
    m.libtorch = libtorch_version();
    m.kernelevo_version = KEVO_VERSION;
    return m;
}

fs::path source_path(const fs::path& cache_dir, const std::string& function, const std::string& arch) {
    return cache_dir / function / (arch + ".cu");
}
fs::path metadata_path(const fs::path& cache_dir, const std::string& function, const std::string& arch) {
    return cache_dir / function / (arch + ".json");
}
fs::path candidate_source_path(const fs::path& cache_dir, const std::string& function, const std::string& arch,
                               const CandidateLanguage& language) {
    return cache_dir / function / (arch + language.cache_source_extension());
}

Lookup lookup(const fs::path& cache_dir, const std::string& function, const std::string& arch,
              const std::string& task_hash, const std::string& reference_hash, const std::string& legacy_reference_hash) {
    Lookup r;
    r.source = source_path(cache_dir, function, arch);
    r.metadata = metadata_path(cache_dir, function, arch);
    const bool has_src = fs::is_regular_file(r.source), has_meta = fs::is_regular_file(r.metadata);
    if (!has_src && !has_meta) {
        r.state = State::missing;
        r.reason = "no cached kernel";
        return r;
    }
    if (!has_src || !has_meta) {
        r.state = State::invalid;
        r.reason = has_src ? "the kernel has no metadata file " + r.metadata.filename().string()
                           : "the metadata has no kernel file " + r.source.filename().string();
        return r;
    }
    try {
        // Capped: a metadata file is small; a huge or binary one is a broken entry, not a reason to stop.
        const std::string text = read_input_file(r.metadata, "a cache metadata file", kMaxMetadataBytes);  // names it
        try {
            r.meta = EntryMeta::from_json(nlohmann::json::parse(text));
        } catch (const std::exception& e) {
            throw UsageError(r.metadata.string() + ": " + e.what());
        }
    } catch (const std::exception& e) {
        r.state = State::invalid;
        // The parser quotes what it read: the bytes of a binary file must not reach a terminal or JSON raw.
        r.reason = printable(std::string("unreadable metadata: ") + e.what());
        return r;
    }
    const EntryMeta& m = *r.meta;
    if (m.function != function || m.arch != arch) {
        r.state = State::invalid;
        // (names read from a file anyone could have committed: escaped for terminals)
        r.reason = "the metadata describes " + printable(m.function) + " " + printable(m.arch) + ", not " + function + " " + arch;
        return r;
    }
    std::vector<std::string> why;
    if (!task_hash.empty() && m.task_hash != task_hash)
        why.push_back("the task changed (inputs, outputs, shapes, tolerance or trials)");
    if (!reference_hash.empty() && m.reference_hash != reference_hash &&
        (legacy_reference_hash.empty() || m.reference_hash != legacy_reference_hash))
        why.push_back("the reference source changed");
    if (sha256_file(r.source) != m.source_hash) why.push_back("the kernel source was edited after it was stored");
    if (const CandidateLanguage* l = with_source_file(m.backend)) {
        fs::path src = candidate_source_path(cache_dir, function, arch, *l);
        std::string recorded = m.facts.is_object() ? m.facts.value("source_hash", "") : "";
        const std::string what = "the " + l->display_name() + " source " + src.filename().string();
        if (!fs::is_regular_file(src)) why.push_back(what + " is missing");
        else if (sha256_file(src) != recorded)
            why.push_back(what + " was edited after it was stored (run kernelevo cache add on it to regenerate " +
                          r.source.filename().string() + ")");
    }
    if (why.empty()) {
        r.state = State::valid;
        return r;
    }
    r.state = State::stale;
    for (size_t i = 0; i < why.size(); ++i) r.reason += (i ? "; " : "") + why[i];
    return r;
}

TaskHashes TaskHashes::of(const Task& t) { return {t.hash(), t.reference_hash(), t.reference_file_hash()}; }

Lookup lookup(const fs::path& cache_dir, const std::string& function, const std::string& arch, const TaskHashes* task) {
    if (!task) return lookup(cache_dir, function, arch, "", "");
    return lookup(cache_dir, function, arch, task->task, task->reference, task->legacy_reference);
}

std::vector<EntryReport> scan(const fs::path& cache_dir, const std::map<std::string, TaskHashes>& tasks) {
    std::vector<EntryReport> out;
    for (const auto& e : list_entries(cache_dir)) {
        EntryReport r;
        r.function = e.function;
        r.arch = e.arch;
        auto t = tasks.find(e.function);
        r.checked = t != tasks.end();
        r.lookup = lookup(cache_dir, e.function, e.arch, r.checked ? &t->second : nullptr);
        for (const fs::path& f : entry_files(cache_dir, e.function, e.arch)) {
            std::error_code ec;
            if (!fs::is_regular_file(f, ec)) continue;
            const auto size = fs::file_size(f, ec);
            if (ec) continue;
            r.bytes += size;
            ++r.files;
        }
        out.push_back(std::move(r));
    }
    return out;
}

void store_candidate(const fs::path& cache_dir, const std::string& source, const CompileResult& compiled, EntryMeta meta) {
    const CandidateLanguage* l = with_source_file(compiled.backend);
    if (!l) {
        store(cache_dir, source, meta);
        return;
    }
    if (!compiled.ok || compiled.generated_source.empty())
        throw UsageError("cache: the " + l->display_name() + " candidate did not compile, so there is no generated .cu to store: " +
                         compiled.log);
    meta.backend = l->name();
    meta.facts = compiled.backend_info.is_object() ? compiled.backend_info : nlohmann::json::object();
    meta.facts.erase("aot_s");  // a timing of this compile, not a property of the entry
    store(cache_dir, compiled.generated_source, meta, &source);
}

namespace {

// An entry's files put in place together: each is first written whole under a temp name beside it
// (a full disk fails here, and the entry stays as it was, its temp files removed), then each is
// renamed over its name in order, the .json last: a lookup never sees a new .cu without its .json.
void place_entry(const std::vector<std::pair<fs::path, std::string>>& files, const std::vector<fs::path>& drop) {
    std::vector<std::pair<fs::path, fs::path>> staged;  // temp name, final name
    auto remove_staged = [&] {
        std::error_code ec;
        for (const auto& [tmp, path] : staged) fs::remove(tmp, ec);
    };
    try {
        for (const auto& [path, data] : files) {
            fs::path tmp = path;
            tmp += ".new." + std::to_string(::getpid());
            write_file_atomic(tmp, data);
            staged.emplace_back(tmp, path);
        }
    } catch (const UsageError& e) {
        remove_staged();
        throw UsageError(std::string(e.what()) + "; the cache entry was left as it was");
    }
    std::error_code ec;
    for (const fs::path& f : drop) fs::remove(f, ec);  // a kernel replaces an earlier entry in another language
    for (const auto& [tmp, path] : staged) {
        fs::rename(tmp, path, ec);
        if (ec) {
            remove_staged();
            throw UsageError("cannot write " + path.string() + ": cannot move it into place: " + ec.message());
        }
    }
}

}  // namespace

void store(const fs::path& cache_dir, const std::string& source, EntryMeta meta, const std::string* candidate_source) {
    if (!is_identifier(meta.function)) throw UsageError("cache: '" + meta.function + "' is not a valid function name");
    if (!is_normalized_arch(meta.arch)) throw UsageError("cache: '" + meta.arch + "' is not an architecture such as sm_90");
    if (std::string why = speedup_problem(meta.speedup); !why.empty()) throw UsageError("cache: " + why);
    meta.source_hash = sha256_hex(source);
    if (meta.date.empty()) meta.date = utc_now();
    const CandidateLanguage* l = with_source_file(meta.backend);
    if (candidate_source && !l) l = with_source_file(language::of_source(*candidate_source).name());
    std::vector<std::pair<fs::path, std::string>> files;
    if (candidate_source && l) {
        const fs::path src = candidate_source_path(cache_dir, meta.function, meta.arch, *l);
        meta.backend = l->name();
        if (!meta.facts.is_object()) meta.facts = nlohmann::json::object();
        meta.facts["source_hash"] = sha256_hex(*candidate_source);
        meta.facts["source_file"] = src.filename().string();
        files.emplace_back(src, *candidate_source);
    } else if (l) {
        throw UsageError("cache: a " + l->display_name() + " entry needs its " + l->display_name() + " source");
    }
    std::vector<fs::path> drop;
    for (const CandidateLanguage* other : language::all())
        if (other != l && other->keeps_source())
            drop.push_back(candidate_source_path(cache_dir, meta.function, meta.arch, *other));
    files.emplace_back(source_path(cache_dir, meta.function, meta.arch), source);
    files.emplace_back(metadata_path(cache_dir, meta.function, meta.arch), meta.to_json().dump(2) + "\n");
    place_entry(files, drop);
}

std::string linked_folder(const fs::path& cache_dir, const std::string& function) {
    std::error_code ec;
    const fs::path folder = cache_dir / function;
    if (!fs::is_symlink(folder, ec)) return "";
    return printable(folder.string()) + " is a symbolic link (to " + printable(fs::read_symlink(folder, ec).string()) + ")";
}

void remove_entry(const fs::path& cache_dir, const std::string& function, const std::string& arch) {
    if (std::string why = linked_folder(cache_dir, function); !why.empty())
        throw UsageError("cache: " + why + ": kernelevo never deletes through a link; remove the link itself if the "
                         "entry is not wanted");
    // A file that is a link is removed itself, never what it points to (std::filesystem::remove).
    std::error_code ec;
    for (const fs::path& f : entry_files(cache_dir, function, arch)) {
        fs::remove(f, ec);
        if (ec) throw UsageError("cache: cannot remove " + f.string() + ": " + ec.message());
    }
    if (fs::is_empty(cache_dir / function, ec)) fs::remove(cache_dir / function, ec);
}

std::vector<EntryName> list_entries(const fs::path& cache_dir) {
    std::set<std::pair<std::string, std::string>> found;
    std::error_code ec;
    if (!fs::is_directory(cache_dir, ec)) return {};
    for (const auto& dir : fs::directory_iterator(cache_dir, ec)) {
        if (!dir.is_directory()) continue;
        const std::string fn = dir.path().filename().string();
        if (!is_identifier(fn)) continue;
        for (const auto& f : fs::directory_iterator(dir.path(), ec)) {
            const std::string ext = f.path().extension().string();
            const std::string stem = f.path().stem().string();
            if ((ext == ".cu" || ext == ".json") && is_normalized_arch(stem)) found.insert({fn, stem});
        }
    }
    std::vector<EntryName> out;
    for (const auto& [f, a] : found) out.push_back({f, a});
    return out;
}

std::string utc_now() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

}  // namespace kevo::cache
