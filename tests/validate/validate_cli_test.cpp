// `kernelevo validate` as users run it: exit codes, JSON, messages naming the file and field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/fs.h"
#include "common/process.h"
#include "validate/validate.h"

using namespace kevo;

namespace {
const fs::path kData = fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias";

ProcessResult kernelevo(std::vector<std::string> args) {
    ProcessOptions po;
    po.argv = {KEVO_EXE};
    po.argv.insert(po.argv.end(), args.begin(), args.end());
    po.timeout_s = 600;
    return run_process(po);
}
}  // namespace

TEST(ValidateCli, CompileErrorIsACandidateFailureWithJson) {
    auto r = kernelevo({"validate", "--task", (kData / "task.json").string(), "--kernel", (kData / "kernels/compile_error.cu").string(), "--json"});
    ASSERT_TRUE(r.started);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["status"], "compile_error");
    EXPECT_NE(j["log"].get<std::string>().find("undefined_function"), std::string::npos);
    for (const char* key : {"speedup", "kernel_us", "reference_us", "max_abs_diff", "log"}) EXPECT_TRUE(j.contains(key)) << key;
}

TEST(ValidateCli, MissingKernelFileIsUsageError) {
    auto r = kernelevo({"validate", "--task", (kData / "task.json").string(), "--kernel", "/nonexistent/k.cu"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("/nonexistent/k.cu"), std::string::npos) << r.err;
}

TEST(ValidateCli, BrokenTaskNamesFileAndField) {
    TempDir dir("kevo-test");
    fs::copy_file(kData / "gelu_bias_ref.cpp", dir.path() / "gelu_bias_ref.cpp");
    std::string text = read_file(kData / "task.json");
    text.replace(text.find("\"float32\""), 9, "\"float33\"");
    write_file_atomic(dir.path() / "task.json", text);
    auto r = kernelevo({"validate", "--task", (dir.path() / "task.json").string(), "--kernel", (kData / "kernels/good.cu").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("task.json: inputs[0].dtype: unknown dtype 'float33'"), std::string::npos) << r.err;
}

TEST(ValidateCli, MissingRequiredOptionIsUsageError) {
    auto r = kernelevo({"validate", "--kernel", (kData / "kernels/good.cu").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE((r.out + r.err).find("--task"), std::string::npos);
}

TEST(ValidateCli, BadArchIsUsageError) {
    auto r = kernelevo({"validate", "--task", (kData / "task.json").string(), "--kernel", (kData / "kernels/good.cu").string(), "--arch", "hopper"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("hopper"), std::string::npos);
}

TEST(ValidateCli, BadTimingOptionsAreUsageErrors) {
    auto flush = kernelevo({"validate", "--task", (kData / "task.json").string(), "--kernel", (kData / "kernels/good.cu").string(),
                            "--l2-flush", "sometimes"});
    EXPECT_EQ(flush.exit_code, 2);
    EXPECT_NE((flush.out + flush.err).find("--l2-flush"), std::string::npos) << flush.err;
    auto copies = kernelevo({"validate", "--task", (kData / "task.json").string(), "--kernel", (kData / "kernels/good.cu").string(),
                             "--timing-copies", "0"});
    EXPECT_EQ(copies.exit_code, 2);
    EXPECT_NE((copies.out + copies.err).find("--timing-copies"), std::string::npos) << copies.err;
    // --repeat measures the timing: without timing it has nothing to measure.
    auto repeat = kernelevo({"validate", "--task", (kData / "task.json").string(), "--kernel", (kData / "kernels/good.cu").string(),
                             "--repeat", "3", "--no-timing"});
    EXPECT_EQ(repeat.exit_code, 2);
    EXPECT_NE(repeat.err.find("--no-timing"), std::string::npos) << repeat.err;
}

TEST(ValidateCli, BrokenReferenceIsASetupErrorWithTheCompilerMessage) {
    TempDir dir("kevo-test");
    write_file_atomic(dir.path() / "ref.cpp", "#include <ATen/ATen.h>\nat::Tensor other_name(const at::Tensor& x, const at::Tensor& b) { return x + b; }\n");
    std::string text = read_file(kData / "task.json");
    text.replace(text.find("gelu_bias_ref.cpp"), 17, "ref.cpp");
    write_file_atomic(dir.path() / "task.json", text);
    auto r = kernelevo({"validate", "--task", (dir.path() / "task.json").string(), "--kernel", (kData / "kernels/good.cu").string(), "--json"});
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.err.find("gelu_bias"), std::string::npos) << r.err;  // the function it could not find
    EXPECT_NE(r.err.find("ref.cpp"), std::string::npos) << r.err;
}

TEST(ValidateCli, ReferenceWrittenForTorchExtensionsBuildsWithoutPython) {
    TempDir dir("kevo-test");
    write_file_atomic(dir.path() / "ref.cpp",
                      "#include <torch/extension.h>\n"
                      "torch::Tensor gelu_bias(torch::Tensor x, torch::Tensor bias) { return torch::gelu(x + bias); }\n");
    std::string text = read_file(kData / "task.json");
    text.replace(text.find("gelu_bias_ref.cpp"), 17, "ref.cpp");
    write_file_atomic(dir.path() / "task.json", text);
    auto r = kernelevo({"validate", "--task", (dir.path() / "task.json").string(), "--kernel", (kData / "kernels/good.cu").string(), "--json"});
    ASSERT_FALSE(r.out.empty()) << r.err;  // a setup error prints {"error": ...}: the status check below then fails with it
    auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["status"] == "ok" || j["status"] == "no_device") << r.out << r.err;
}

// Every validation draws fresh random inputs (a candidate cannot know them, nor find results an
// earlier candidate left for them); --seed repeats one. The seed used is in the details.
TEST(ValidateCli, EachValidationHasItsOwnSeedUnlessOneIsGiven) {
    auto seed_of = [](std::vector<std::string> extra) {
        std::vector<std::string> args = {"validate", "--task", (kData / "task.json").string(), "--kernel", (kData / "kernels/good.cu").string(), "--json", "--no-timing"};
        args.insert(args.end(), extra.begin(), extra.end());
        ProcessResult r = kernelevo(args);
        auto j = nlohmann::json::parse(r.out);
        EXPECT_TRUE(j["details"].contains("seed")) << r.out.substr(0, 2000);
        return j["details"].value("seed", uint64_t{0});
    };
    const uint64_t a = seed_of({}), b = seed_of({});
    EXPECT_NE(a, 0u);
    EXPECT_NE(a, b);
    EXPECT_EQ(seed_of({"--seed", "7"}), 7u);
    EXPECT_NE(kernelevo({"validate", "--task", (kData / "task.json").string(), "--kernel", (kData / "kernels/good.cu").string(), "--seed", "-3"}).exit_code, 0);
}

TEST(ValidateCli, GoodKernelWithoutGpuIsNoDeviceAfterCompiling) {
    auto r = kernelevo({"validate", "--task", (kData / "task.json").string(), "--kernel", (kData / "kernels/good.cu").string(), "--json"});
    auto j = nlohmann::json::parse(r.out);
    if (j["status"] == "ok") GTEST_SKIP() << "a GPU is present (covered by the GPU tests)";
    EXPECT_EQ(j["status"], "no_device");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(j["arch"], "sm_90");
}

namespace kevo {
namespace {

// What a validation job carries to a worker: every portable option arrives as set on the search's
// side, and nothing local (paths, the device) travels.
TEST(PortableOptions, EveryPortableOptionTravelsAndNothingLocal) {
    ValidateOptions a;
    a.timeout_s = 7;
    a.timing_trials = 33;
    a.min_timing_trials = 11;
    a.target_ci = 0.02;
    a.verify_fraction = 0.5;
    a.reuse_reference_timing = false;
    a.warmup = 3;
    a.l2_flush = "none";
    a.timing_copies = 8;
    a.suspicious_speedup = 4;
    a.time_kernels = false;
    a.extend_timing_s = 0.25;
    a.seed = 99;
    a.runner = "/somewhere/kernelevo-runner";
    a.device_index = 3;
    const nlohmann::json j = portable_options(a);
    ValidateOptions b;
    apply_portable_options(b, nlohmann::json::parse(j.dump()));
#define KEVO_X(f) EXPECT_EQ(b.f, a.f) << #f;
    KEVO_PORTABLE_VALIDATE_OPTIONS(KEVO_X)
#undef KEVO_X
    EXPECT_EQ(j.size(), 13u);  // a new portable option: add it to the values above
    EXPECT_TRUE(b.runner.empty());
    EXPECT_EQ(b.device_index, -1);
    ValidateOptions c;
    apply_portable_options(c, nlohmann::json{{"warmup", 2}});  // absent ones keep their values
    EXPECT_EQ(c.warmup, 2);
    EXPECT_EQ(c.timing_trials, ValidateOptions{}.timing_trials);
}

}  // namespace
}  // namespace kevo
