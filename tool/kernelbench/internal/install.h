// The trusted side of a KernelBench import (kernelbench.cpp): a problem's Python runs sandboxed with
// a private folder of its own as its only writable place; this code, outside any sandbox, writes the
// suite's shared generated files and installs each problem's checked results into OUT/NAME/.
#pragma once
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace kevo::kernelbench {

// The suite's generic reference, shared by its tasks: OUT/kernelbench_reference.cpp, with its bytes'
// sha256 recorded beside it (reference/reference.h: build_reference checks it before every build).
extern const char* const kReferenceName;
// The generic reference's entry points (jit_reference.cpp): what every installed task names.
extern const char* const kReferenceFunction;
extern const char* const kReferenceSetup;

// Writes OUT/kernelbench_reference.cpp (when its bytes differ) and its sha256 record; returns its path.
std::filesystem::path write_suite_reference(const std::filesystem::path& out, const std::string& text);

// The task name of a problem file, as the importer gives it: kb<level>_<stem>, e.g. kb1_19_ReLU.
// The tool names a problem's task itself; a result naming another task is refused.
std::string problem_task_name(const std::filesystem::path& file);

// A fresh private folder for one problem's sandbox (0700, under OUT, never a task's final place).
std::filesystem::path make_private_dir(const std::filesystem::path& out, const std::string& name);
// Removes it whatever the problem left there (read-only folders, links: never followed).
void remove_private_dir(const std::filesystem::path& dir);

// Installs an "ok" result of the importer run in `private_dir` as OUT/NAME/: checks its task
// (result["task_json"]: the task's name, the files it names are plain files of PRIVATE/NAME/), sets
// the reference to the suite's generic one, copies those files, writes task.json from the result and
// loads it as a task; then replaces OUT/NAME/ with it. On any failure the result becomes "failed"
// with the reason and OUT/NAME/ is left as it was. result["task"] becomes the installed task.json,
// result["tolerance"] its tolerance. Of the result's task only the fields the importer writes are
// taken: its atol and rtol clamped to [1e-4, 1e-2] (0.1 under the bf16 policy), trials and timing
// the tool's defaults, whatever the sandbox wrote.
// `precision` is the task's "precision" as the tool chose it (Precision::to_json(); null: the
// default), never what the result says.
void install_result(nlohmann::json& result, const std::filesystem::path& private_dir, const std::filesystem::path& out,
                    const std::string& name, const nlohmann::json& precision = nullptr);

// Installs an "ok" result of a model import (a level-3 problem: PRIVATE/NAME/ is a model folder,
// python/kernelevo/model_plan.md) as OUT/NAME/: plan.json (its regions checked: an identifier as
// task_name, a task folder only where the status is "task" and then exactly regions/TASK_NAME),
// plan.md, and each region's task staged as install_result stages a task (its reference the tool's
// own copy of `reference_text` in OUT/NAME/regions/, its files plain files, task.json loading as a
// task) with its pytorch.json (parsed) and model.pt2. result["model"] becomes the plan's summary
// (counts by status, the regions); on any failure the result is "failed" with the reason and
// OUT/NAME/ is left as it was.
void install_model(nlohmann::json& result, const std::filesystem::path& private_dir, const std::filesystem::path& out,
                   const std::string& name, const std::string& reference_text, const nlohmann::json& precision = nullptr);

}  // namespace kevo::kernelbench
