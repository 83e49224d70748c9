// `kernelevo import kernelbench`: one problem cannot touch the rest of its suite. Each problem's
// sandbox writes only to a private folder of its own; the tool writes the shared reference and each
// task.json and installs only the checked files. A hostile problem (tests/data/kernelbench/
// hostile_neighbours.py: appends to the shared reference, rewrites its neighbour's task.json, writes
// beside the suite, forges its own result to name the neighbour's file) imported after an honest one
// leaves the honest task and the shared reference byte for byte as an import without it makes them.
#include <algorithm>

#include <gtest/gtest.h>

#include "kb_suite.h"
#include "sandbox/sandbox.h"

namespace kevo {
namespace {

const char* const kMark = "kevo_isolation_marker";

// Every regular file under `dir`, by its path relative to it, with its bytes.
std::map<std::string, std::string> files_under(const fs::path& dir) {
    std::map<std::string, std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) files[fs::relative(e.path(), dir).generic_string()] = read_file(e.path());
    return files;
}

std::vector<std::string> entries(const fs::path& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

TEST(KernelBenchImportIsolation, AHostileProblemLeavesTheSuiteAndItsNeighbourAsAnImportWithoutIt) {
    if (!sandbox_layers().namespaces) GTEST_SKIP() << "bubblewrap cannot run here: " << sandbox_layers().why_not;
    fs::remove(fs::path("/tmp") / kMark);
    TempDir tmp("kevo-kb-isolation");
    const fs::path honest = kbtest::problems() / "honest_relu.py", hostile = kbtest::problems() / "hostile_neighbours.py";
    const std::vector<std::string> common = {"--jobs", "1", "--max-numel", "4096"};
    auto import = [&](const fs::path& out, std::vector<std::string> files) {
        files.insert(files.begin(), {"import", "kernelbench", "--out", out.string()});
        files.insert(files.end(), common.begin(), common.end());
        return kbtest::kernelevo(files, 1200);
    };
    const fs::path alone = tmp.path() / "alone", both = tmp.path() / "both";
    ProcessResult a = import(alone, {honest.string()});
    ASSERT_EQ(a.exit_code, 0) << a.describe() << "\n" << a.err;
    // The honest problem first (one at a time): its task exists when the hostile one runs.
    ProcessResult b = import(both, {honest.string(), hostile.string()});
    ASSERT_TRUE(b.started) << b.error;

    // The honest task and the shared reference (with its hash record): the same bytes.
    EXPECT_EQ(files_under(alone / "kb_honest_relu"), files_under(both / "kb_honest_relu"));
    const std::string shipped = read_file(fs::path(KEVO_SOURCE_DIR) / "tool" / "kernelbench" / "jit_reference.cpp");
    EXPECT_EQ(read_file(both / "kernelbench_reference.cpp"), shipped) << "the shared reference was changed";
    EXPECT_EQ(read_file(both / "kernelbench_reference.cpp.sha256"), read_file(alone / "kernelbench_reference.cpp.sha256"));
    EXPECT_EQ(read_file(both / "kernelbench_reference.cpp.sha256").substr(0, 64), sha256_hex(shipped));
    const Task t = load_task(both / "kb_honest_relu" / "task.json");
    EXPECT_LT(t.atol, 1) << "the neighbour's tolerance was rewritten";

    // The hostile problem: failed, with the reason; the import says so (exit 1, 1 of 2 imported).
    const auto report = nlohmann::json::parse(read_file(both / "import.json"));
    std::map<std::string, nlohmann::json> by_name;
    for (const auto& j : report["results"]) by_name[j.value("name", "")] = j;
    const auto& h = by_name["kb_hostile_neighbours"];
    EXPECT_EQ(h.value("status", "missing"), "failed") << h.dump();
    EXPECT_NE(h.value("reason", "").find("'../kb_honest_relu/task.json' is not a plain file name"), std::string::npos) << h.dump();
    EXPECT_EQ(by_name["kb_honest_relu"].value("status", "missing"), "ok");
    EXPECT_EQ(b.exit_code, 1) << b.err;
    EXPECT_EQ(report.value("imported", -1), 1);
    EXPECT_EQ(report.value("failed", -1), 1);
    EXPECT_NE(b.err.find("imported 1/2 (0 refused, 1 failed)"), std::string::npos) << b.err;

    // Nothing beside: the suite holds its report, the reference and its record, the honest task (no
    // private folder left, no task for the failed problem); no marker anywhere the problem aimed.
    EXPECT_EQ(entries(both), (std::vector<std::string>{"import.json", "kb_honest_relu", "kernelbench_reference.cpp",
                                                       "kernelbench_reference.cpp.sha256"}));
    for (const auto& e : fs::recursive_directory_iterator(tmp.path()))
        EXPECT_NE(e.path().filename().string(), kMark) << e.path() << " was written by a problem file";
    EXPECT_FALSE(fs::exists(fs::path("/tmp") / kMark));
}

}  // namespace
}  // namespace kevo
