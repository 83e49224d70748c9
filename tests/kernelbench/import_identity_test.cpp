// An imported task's identity is its own problem's: importing a subset of a batch again gives the
// same task and reference hashes (and bytes) as the batch did, so search states and cache entries
// stay valid. The suite's shared reference is built only with the bytes recorded when the import
// generated it: one changed afterwards (a constructor appended) is refused before it is compiled.
#include <fstream>

#include <gtest/gtest.h>

#include "common/error.h"
#include "kb_suite.h"
#include "reference/reference.h"

namespace kevo {
namespace {

std::map<std::string, std::string> files_under(const fs::path& dir) {
    std::map<std::string, std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) files[fs::relative(e.path(), dir).generic_string()] = read_file(e.path());
    return files;
}

ProcessResult import(const fs::path& out, const std::vector<std::string>& problems) {
    std::vector<std::string> args = {"import", "kernelbench", "--out", out.string(), "--jobs", "1", "--max-numel", "4096"};
    for (const auto& p : problems) args.push_back((kbtest::problems() / p).string());
    return kbtest::kernelevo(args, 1800);
}

TEST(KernelBenchImportIdentity, ASubsetImportedAgainHasTheSameHashesAsInItsBatch) {
    TempDir tmp("kevo-kb-identity");
    // Five problems, one worker: each problem of the batch after another one (the second and the
    // fourth are imported again alone).
    const std::vector<std::string> batch = {"level1/19_ReLU.py", "level1/24_LogSoftmax.py", "level1/48_Mean_reduction_over_a_dimension.py",
                                            "level1/100_HingeLoss.py", "honest_relu.py"};
    ProcessResult all = import(tmp.path() / "batch", batch);
    ASSERT_EQ(all.exit_code, 0) << all.describe() << "\n" << all.err;
    ProcessResult some = import(tmp.path() / "subset", {batch[1], batch[3]});
    ASSERT_EQ(some.exit_code, 0) << some.describe() << "\n" << some.err;
    // Issue 40: the second suite's reference has the same bytes, so its build is reused from the
    // compiled-object cache (keyed on content, not on the --out it lives in).
    EXPECT_NE(some.err.find("kernelevo: reference reused from the cache"), std::string::npos) << some.err;
    const auto library = [&](const char* suite) {
        return nlohmann::json::parse(read_file(tmp.path() / suite / "import.json")).value("reference_library", "");
    };
    EXPECT_EQ(library("batch"), library("subset"));
    for (const char* name : {"kb1_24_LogSoftmax", "kb1_100_HingeLoss"}) {
        const Task in_batch = load_task(tmp.path() / "batch" / name / "task.json");
        const Task alone = load_task(tmp.path() / "subset" / name / "task.json");
        EXPECT_EQ(in_batch.hash(), alone.hash()) << name;
        EXPECT_EQ(in_batch.reference_hash(), alone.reference_hash()) << name << ": the traced model differs with its batch";
        EXPECT_EQ(files_under(tmp.path() / "batch" / name), files_under(tmp.path() / "subset" / name)) << name;
    }
}

// `import -q` (issue 40: it was rejected) prints neither progress nor the per-problem lines.
TEST(KernelBenchImportIdentity, QuietImportPrintsNoProgress) {
    TempDir tmp("kevo-kb-quiet");
    ProcessResult r = kbtest::kernelevo({"import", "kernelbench", "-q", "--out", (tmp.path() / "q").string(), "--jobs", "1",
                                         "--max-numel", "4096", (kbtest::problems() / "level1/19_ReLU.py").string()});
    ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
    EXPECT_EQ(r.err.find("[1/1]"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("kernelevo: imported"), std::string::npos) << r.err;
    EXPECT_TRUE(fs::exists(tmp.path() / "q" / "kb1_19_ReLU" / "task.json"));
}

// Issue 51 item 4b: quiet means no progress, not no errors: `import -q` of a refused problem (and of
// one that is not a problem at all) still says, one line each, which and why, beside exit 1.
TEST(KernelBenchImportIdentity, QuietImportStillNamesEveryRefusedProblemWithItsReason) {
    TempDir tmp("kevo-kb-quiet-refused");
    const fs::path batchnorm = kbtest::problems() / "level1/33_BatchNorm.py";
    const fs::path not_a_problem = tmp.path() / "level1" / "904_NotAProblem.py";
    fs::create_directories(not_a_problem.parent_path());
    write_file_atomic(not_a_problem, "x = 1\n");
    ProcessResult r = kbtest::kernelevo({"import", "kernelbench", "-q", "--out", (tmp.path() / "q").string(), "--jobs",
                                         "1", "--max-numel", "4096", batchnorm.string(), not_a_problem.string()});
    EXPECT_EQ(r.exit_code, 1) << r.describe() << "\n" << r.err;
    EXPECT_NE(r.err.find("kb1_33_BatchNorm: refused: BatchNorm in training mode"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("kb1_904_NotAProblem: refused: the file defines no Model"), std::string::npos) << r.err;
    size_t lines = 0;
    for (char c : r.err) lines += c == '\n';
    EXPECT_EQ(lines, 2u) << "one line per refused problem, no progress:\n" << r.err;
    EXPECT_EQ(r.err.find("kernelevo: imported"), std::string::npos) << r.err;
}

TEST(KernelBenchImportIdentity, TheSuiteReferenceChangedAfterTheImportIsNotBuilt) {
    const auto& imp = kbtest::cpu_import();
    ASSERT_EQ(imp.by_name.count("kb1_19_ReLU"), 1u) << imp.run.err;
    ASSERT_EQ(imp.by_name.at("kb1_19_ReLU").value("status", ""), "ok") << imp.by_name.at("kb1_19_ReLU").dump();
    // A copy of the suite's reference, its record and one task (the import's own stays as it is).
    TempDir tmp("kevo-kb-refcheck");
    for (const char* f : {"kernelbench_reference.cpp", "kernelbench_reference.cpp.sha256"})
        fs::copy_file(imp.out / f, tmp.path() / f);
    fs::copy(imp.out / "kb1_19_ReLU", tmp.path() / "kb1_19_ReLU", fs::copy_options::recursive);
    const fs::path task_file = tmp.path() / "kb1_19_ReLU" / "task.json";
    if (reference_support().available) {
        ReferenceBuild ok = build_reference(load_task(task_file));
        EXPECT_TRUE(ok.ok) << ok.log;
    }
    {
        std::ofstream ref(tmp.path() / "kernelbench_reference.cpp", std::ios::app);
        ref << "\n#include <cstdlib>\nstatic int kevo_injected = [] { return std::system(\"true\"); }();\n";
    }
    try {
        (void)build_reference(load_task(task_file));
        ADD_FAILURE() << "a reference changed after the import was built";
    } catch (const TaskError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("changed since it was generated"), std::string::npos) << what;
        EXPECT_NE(what.find("kernelbench_reference.cpp.sha256"), std::string::npos) << what;
    } catch (const UsageError& e) {
        // Without LibTorch the build is refused before the check; the record is still there to check.
        EXPECT_FALSE(reference_support().available) << e.what();
    }
}

}  // namespace
}  // namespace kevo
