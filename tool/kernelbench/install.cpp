// The trusted side of a KernelBench import (internal/install.h): shared files, private folders, and
// the installation of each problem's checked results.
#include "kernelbench/internal/install.h"

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <stdexcept>
#include <vector>

#include "common/fs.h"
#include "common/text.h"
#include "reference/reference.h"
#include "task/task.h"

namespace kevo::kernelbench {

const char* const kReferenceName = "kernelbench_reference.cpp";
const char* const kReferenceFunction = "kevo_kb::forward";
const char* const kReferenceSetup = "kevo_kb::setup";

namespace {

// Why an importer's result is not installed (one line).
struct NotInstalled : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A file the task names: a plain name in the task's own folder (no path, no "..", not task.json).
std::string plain_file(const nlohmann::json& v, const std::string& field) {
    static const std::regex plain("[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}");
    if (!v.is_string()) throw NotInstalled(field + " is not a file name");
    const std::string f = v.get<std::string>();
    if (!std::regex_match(f, plain) || f == "task.json")
        throw NotInstalled(field + " '" + f + "' is not a plain file name in the task's folder");
    return f;
}

std::string text_or_empty(const nlohmann::json& obj, const char* key) {
    return obj.contains(key) && obj[key].is_string() ? obj[key].get<std::string>() : "";
}

// The tolerance the tool installs (README, task file: imported tolerances lie in [1e-4, 1e-2]): the
// importer's measured atol and rtol clamped to [kTolFloor, the ceiling], a bound the sandbox cannot
// move. The ceiling is 1e-2 (KernelBench's own fp32 check), 0.1 under the bf16 policy, whose own
// error the importer admits. Absent: the task's default by dtype (1e-4, 1e-2 for fp16/bf16).
constexpr double kTolFloor = 1e-4, kTolCeil = 1e-2, kTolCeilBf16 = 0.1;

nlohmann::json clamped_tolerance(const nlohmann::json& given, const nlohmann::json& precision) {
    const bool bf16 =
        !precision.is_null() && parse_precision(precision, "the precision policy").policy == KEVO_PRECISION_BF16;
    const double ceil = bf16 ? kTolCeilBf16 : kTolCeil;
    bool clamped = false;
    auto bound = [&](const nlohmann::json& v, const char* field) {
        if (!v.is_number()) throw NotInstalled(std::string(field) + " is not a number");
        const double x = v.get<double>(), c = std::isfinite(x) ? std::min(std::max(x, kTolFloor), ceil) : ceil;
        clamped = clamped || c != x;
        return c;
    };
    nlohmann::json tol = nlohmann::json::object();
    if (given.is_number()) {
        tol["atol"] = tol["rtol"] = bound(given, "tolerance");
    } else if (given.is_object()) {
        if (given.contains("policy")) {
            if (!given["policy"].is_string()) throw NotInstalled("tolerance.policy is not a string");
            tol["policy"] = given["policy"];
        }
        for (const char* k : {"atol", "rtol"})
            if (given.contains(k))
                tol[k] = bound(given[k], k == std::string("atol") ? "tolerance.atol" : "tolerance.rtol");
    } else {
        throw NotInstalled("tolerance is neither a number nor an object");
    }
    if (clamped) {
        char note[96];
        std::snprintf(note, sizeof note, "; kernelevo clamped it to [%g, %g]", kTolFloor, ceil);
        tol["policy"] = (tol.contains("policy") ? tol["policy"].get<std::string>() : std::string("imported")) + note;
    }
    return tol;
}

// The task to write, from the importer's result: its own name, the suite's generic reference (never
// what the result says), and the files it names (`files`), each a plain name checked above. Only the
// fields the importer writes are taken (trials, timing and the like are the tool's defaults), the
// tolerance clamped (clamped_tolerance), the precision the tool's.
nlohmann::json checked_task(const nlohmann::json& given, const std::string& name, std::set<std::string>& files,
                            const nlohmann::json& precision) {
    if (!given.is_object()) throw NotInstalled("the result holds no task");
    nlohmann::json task = nlohmann::json::object();
    for (const char* key : {"name", "description", "reference", "inputs", "outputs", "shapes", "flops"})
        if (given.contains(key)) task[key] = given[key];
    if (given.contains("tolerance")) task["tolerance"] = clamped_tolerance(given["tolerance"], precision);
    if (text_or_empty(task, "name") != name)
        throw NotInstalled("the result names task '" + text_or_empty(task, "name") + "', not " + name);
    const nlohmann::json ref = task.contains("reference") && task["reference"].is_object() ? task["reference"] : nlohmann::json::object();
    nlohmann::json r = {{"source", std::string("../") + kReferenceName}, {"function", kReferenceFunction}, {"signature", "vector"},
                        {"setup", kReferenceSetup}};
    r["arg"] = plain_file(ref.contains("arg") ? ref["arg"] : nlohmann::json(), "reference.arg");
    files.insert(r["arg"].get<std::string>());
    if (ref.contains("show")) {
        if (!ref["show"].is_array()) throw NotInstalled("reference.show is not a list");
        for (const auto& s : ref["show"]) {
            if (!s.is_object()) throw NotInstalled("reference.show holds a non-object");
            const std::string f = plain_file(s.contains("file") ? s["file"] : nlohmann::json(), "reference.show[].file");
            files.insert(f);
            r["show"].push_back({{"file", f}, {"language", text_or_empty(s, "language")}, {"title", text_or_empty(s, "title")}});
        }
    }
    task["reference"] = r;
    if (!precision.is_null()) task["precision"] = precision;  // the tool's choice, not the sandboxed importer's
    if (!task.contains("inputs") || !task["inputs"].is_array()) throw NotInstalled("the task has no inputs list");
    for (const auto& in : task["inputs"]) {
        if (!in.is_object() || !in.contains("init") || !in["init"].is_object()) continue;  // load_task says what is wrong
        if (text_or_empty(in["init"], "kind") == "file")
            files.insert(plain_file(in["init"].contains("path") ? in["init"]["path"] : nlohmann::json(), "inputs[].init.path"));
    }
    return task;
}

// Copies a file the sandbox wrote into a new file of the tool's (its own mode, never a link followed).
void copy_checked(const fs::path& from, const fs::path& to) {
    std::error_code ec;
    if (fs::symlink_status(from, ec).type() != fs::file_type::regular)
        throw NotInstalled(from.filename().string() + " is missing or not a regular file");
    std::ifstream in(from, std::ios::binary);
    std::ofstream out(to, std::ios::binary | std::ios::trunc);
    if (!in || !out) throw NotInstalled("cannot copy " + from.filename().string());
    out << in.rdbuf();
    out.close();
    if (!out) throw NotInstalled("cannot write " + to.string());
}

fs::path fresh_dir(const fs::path& parent, const std::string& prefix) {
    std::string templ = (parent / (prefix + "XXXXXX")).string();
    if (!mkdtemp(templ.data())) throw NotInstalled("cannot create a folder in " + parent.string());
    return templ;
}

void make_removable(const fs::path& dir, int depth) {
    std::error_code ec;
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add, ec);
    if (depth > 64) return;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->symlink_status(ec).type() == fs::file_type::directory) make_removable(it->path(), depth + 1);
}

}  // namespace

fs::path write_suite_reference(const fs::path& out, const std::string& text) {
    const fs::path ref = fs::absolute(out / kReferenceName).lexically_normal();
    std::error_code ec;
    if (!fs::is_regular_file(fs::symlink_status(ref, ec)) || read_file(ref) != text) write_file_atomic(ref, text);
    write_reference_sha256(ref, text);
    return ref;
}

std::string problem_task_name(const fs::path& file) {
    std::smatch m;
    const std::string abs = fs::absolute(file).string();
    std::string name = std::regex_search(abs, m, std::regex("level[_-]?([0-9]+)")) ? "kb" + m[1].str() + "_" : "kb_";
    for (char c : file.stem().string()) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    name = std::regex_replace(name, std::regex("_+$"), "");
    return name;
}

fs::path make_private_dir(const fs::path& out, const std::string& name) { return fresh_dir(out, ".import-" + name + "-"); }

void remove_private_dir(const fs::path& dir) {
    make_removable(dir, 0);
    std::error_code ec;
    fs::remove_all(dir, ec);
}

namespace {

// Writes the checked task `given` (named `name`) into the new folder `to`: the files it names, copied
// from `from`, and task.json, which must load as a task (sizes, names, shapes). Returns the task written.
nlohmann::json stage_task(const nlohmann::json& given, const std::string& name, const fs::path& from,
                          const fs::path& to, const nlohmann::json& precision) {
    std::set<std::string> files;
    const nlohmann::json task = checked_task(given, name, files, precision);
    for (const auto& f : files) copy_checked(from / f, to / f);
    // Its name, description and reference first, as the importer writes a task.
    nlohmann::ordered_json ordered;
    for (const char* key : {"name", "description", "reference"})
        if (task.contains(key)) ordered[key] = nlohmann::ordered_json::parse(task[key].dump());
    for (const auto& [key, value] : task.items())
        if (!ordered.contains(key)) ordered[key] = nlohmann::ordered_json::parse(value.dump());
    write_file_atomic(to / "task.json", ordered.dump(2) + "\n");
    (void)load_task(to / "task.json");
    return task;
}

// An installation that failed: its staging folder removed, the result "failed" with the reason, which
// names the place in the suite rather than the staging folder. `what`: "result" or "model".
void mark_not_installed(nlohmann::json& result, const fs::path& stage, const fs::path& dest, const std::string& what,
                        const std::string& error) {
    if (!stage.empty()) remove_private_dir(stage);
    result["status"] = "failed";
    std::string why = error;
    for (size_t at; !stage.empty() && (at = why.find(stage.string())) != std::string::npos;)
        why.replace(at, stage.string().size(), dest.string());
    // (printable: a parse error quotes the sandbox's bytes)
    result["reason"] = printable("the importer's " + what + " was not installed: " + why);
}

}  // namespace

void install_result(nlohmann::json& result, const fs::path& private_dir, const fs::path& out, const std::string& name,
                    const nlohmann::json& precision) {
    fs::path stage;
    try {
        stage = fresh_dir(out, "." + name + ".install-");
        const nlohmann::json task = stage_task(result.contains("task_json") ? result["task_json"] : nlohmann::json(),
                                               name, private_dir / name, stage, precision);
        const fs::path dest = out / name;
        std::error_code ec;
        fs::remove_all(dest, ec);
        fs::rename(stage, dest);
        result["task"] = (dest / "task.json").string();
        if (task.contains("tolerance")) result["tolerance"] = task["tolerance"];  // as installed
    } catch (const std::exception& e) {
        mark_not_installed(result, stage, out / name, "result", e.what());
        result.erase("task");
        result.erase("tolerance");
    }
    result.erase("task_json");
}

namespace {

// A file of the sandbox's that is read, never followed through a link, at most `limit` bytes.
std::string read_checked(const fs::path& file, uintmax_t limit) {
    std::error_code ec;
    if (fs::symlink_status(file, ec).type() != fs::file_type::regular)
        throw NotInstalled(file.filename().string() + " is missing or not a regular file");
    if (fs::file_size(file, ec) > limit) throw NotInstalled(file.filename().string() + " is larger than expected");
    return read_file(file);
}

nlohmann::ordered_json parse_checked(const fs::path& file) {
    try {
        return nlohmann::ordered_json::parse(read_checked(file, 64u << 20));
    } catch (const nlohmann::json::exception& e) {
        throw NotInstalled(file.filename().string() + " is not JSON: " + e.what());
    }
}

// One region of the plan: its task folder staged from PRIVATE/regions/TASK/ when its status is
// "task" (the task checked as a suite's task is, plus its pytorch.json and model.pt2), counted in `summary`.
void stage_region(nlohmann::ordered_json& r, const fs::path& from, const fs::path& to, const nlohmann::json& precision,
                  nlohmann::json& summary) {
    static const std::regex ident("[A-Za-z_][A-Za-z0-9_]{0,127}");
    if (!r.is_object()) throw NotInstalled("plan.json: a region is not an object");
    const std::string task_name = r.contains("task_name") && r["task_name"].is_string() ? r["task_name"].get<std::string>() : "";
    const std::string status = r.contains("status") && r["status"].is_string() ? r["status"].get<std::string>() : "";
    if (!std::regex_match(task_name, ident)) throw NotInstalled("plan.json: region task_name '" + task_name + "' is not an identifier");
    if (status != "task") {
        r["task"] = nullptr;  // only the tool's own folders are named
    } else {
        if (!r.contains("task") || r["task"] != "regions/" + task_name)
            throw NotInstalled("plan.json: region " + task_name + " names a task folder other than regions/" + task_name);
        const fs::path src = from / task_name, dest = to / task_name;
        fs::create_directories(dest);
        stage_task(nlohmann::json::parse(parse_checked(src / "task.json").dump()), task_name, src, dest, precision);
        std::error_code ec;
        if (fs::exists(fs::symlink_status(src / "pytorch.json", ec)))
            write_file_atomic(dest / "pytorch.json", parse_checked(src / "pytorch.json").dump(2) + "\n");
        if (fs::exists(fs::symlink_status(src / "model.pt2", ec))) copy_checked(src / "model.pt2", dest / "model.pt2");
    }
    const std::string key = status == "task" ? "tasks" : status;
    summary[key] = summary.value(key, 0) + 1;
    summary["regions"].push_back({{"name", r.value("name", "")}, {"task_name", task_name}, {"kind", r.value("kind", "")},
                                  {"share", r.contains("share") && r["share"].is_number() ? r["share"].get<double>() : 0.0},
                                  {"status", status}, {"reason", r.contains("reason") && r["reason"].is_string() ? r["reason"].get<std::string>() : ""}});
}

// What `kernelevo search --model-dir` writes into a model folder (model_plan.md): the regions' search
// states and the kernels they cached. A re-import replaces the plan and the region tasks and keeps these:
// a state or kernel made for another version of a task is stale there (its hashes say so), never lost.
const char* const kKeptModelFolders[] = {"search", "cache"};

// Moves DEST/search and DEST/cache (a folder or a link, as they are) into the staged folder; on a failure
// what was moved goes back and nothing is installed. Returns the names moved.
std::vector<std::string> keep_search_results(const fs::path& dest, const fs::path& stage) {
    std::vector<std::string> moved;
    std::error_code ec;
    // (a DEST that is a link is replaced, never moved out of)
    if (fs::symlink_status(dest, ec).type() != fs::file_type::directory) return moved;
    for (const char* sub : kKeptModelFolders) {
        if (fs::symlink_status(dest / sub, ec).type() == fs::file_type::not_found) continue;
        fs::rename(dest / sub, stage / sub, ec);
        if (!ec) {
            moved.push_back(sub);
            continue;
        }
        std::error_code back;
        for (const auto& m : moved) fs::rename(stage / m, dest / m, back);
        throw NotInstalled("cannot keep " + (dest / sub).string() + " (the model's searches): " + ec.message());
    }
    return moved;
}

// The staged model folder in place of DEST, with DEST's search results (keep_search_results).
void replace_model_folder(const fs::path& stage, const fs::path& dest) {
    const std::vector<std::string> kept = keep_search_results(dest, stage);
    std::error_code ec;
    fs::remove_all(dest, ec);
    fs::rename(stage, dest, ec);
    if (!ec) return;
    std::error_code back;  // the searches go back where they were before the staging folder is removed
    fs::create_directories(dest, back);
    for (const auto& m : kept) fs::rename(stage / m, dest / m, back);
    throw NotInstalled("cannot move the model folder into place at " + dest.string() + ": " + ec.message());
}

}  // namespace

void install_model(nlohmann::json& result, const fs::path& private_dir, const fs::path& out, const std::string& name,
                   const std::string& reference_text, const nlohmann::json& precision) {
    fs::path stage;
    try {
        const fs::path from = private_dir / name;
        nlohmann::ordered_json plan = parse_checked(from / "plan.json");
        if (!plan.is_object() || !plan.contains("regions") || !plan["regions"].is_array())
            throw NotInstalled("plan.json holds no list of regions");
        stage = fresh_dir(out, "." + name + ".install-");
        fs::create_directories(stage / "regions");
        write_suite_reference(stage / "regions", reference_text);  // the tool's, never the sandbox's
        nlohmann::json summary = {{"tasks", 0}, {"refused", 0}, {"below_threshold", 0}, {"failed", 0}, {"regions", nlohmann::json::array()}};
        std::set<std::string> seen;
        for (auto& r : plan["regions"]) {
            stage_region(r, from / "regions", stage / "regions", precision, summary);
            if (!seen.insert(summary["regions"].back()["task_name"].get<std::string>()).second)
                throw NotInstalled("plan.json: two regions are task " + summary["regions"].back()["task_name"].get<std::string>());
        }
        write_file_atomic(stage / "plan.json", plan.dump(2) + "\n");
        std::error_code ec;
        if (fs::exists(fs::symlink_status(from / "plan.md", ec))) write_file_atomic(stage / "plan.md", read_checked(from / "plan.md", 16u << 20));
        const fs::path dest = out / name;
        replace_model_folder(stage, dest);
        summary["model"] = plan.value("model", name);
        summary["plan"] = (dest / "plan.json").string();
        summary["device"] = plan.value("device", "");
        summary["total_ms"] = plan.contains("total_ms") && plan["total_ms"].is_number() ? plan["total_ms"].get<double>() : 0.0;
        result["model"] = summary;
    } catch (const std::exception& e) {
        mark_not_installed(result, stage, out / name, "model", e.what());
        result.erase("model");
    }
    result.erase("plan");
}

}  // namespace kevo::kernelbench
