// The validator on a real GPU: correct, wrong, crashing, hanging kernels and every known cheat.
// Skips where there is no CUDA device; runs for real on the H200.
#include <gtest/gtest.h>

#include "common/fs.h"
#include "task/task.h"
#include "validate/validate.h"

using namespace kevo;

namespace {
const fs::path kData = fs::path(KEVO_TEST_DATA_DIR);

Validator& gelu_validator() {
    static Validator* v = [] {
        ValidateOptions o;
        o.timeout_s = 20;
        o.timing_trials = 30;
        o.warmup = 3;
        return new Validator(load_task(kData / "gelu_bias" / "task.json"), o);
    }();
    return *v;
}

#define REQUIRE_GPU()                                                                       \
    do {                                                                                    \
        if (!gelu_validator().device().present)                                             \
            GTEST_SKIP() << "no CUDA device: " << gelu_validator().device().error;          \
    } while (0)

ValidationResult validate_fixture(const std::string& name) {
    return gelu_validator().validate(read_file(kData / "gelu_bias" / "kernels" / name));
}

struct Case {
    const char* kernel;
    Status expected;
    const char* log_contains;
};
// So that gtest names the case instead of dumping its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.kernel << " -> " << status_name(c.expected); }

class Fixtures : public ::testing::TestWithParam<Case> {};
}  // namespace

TEST(ValidateGpu, CorrectKernelIsOkWithTimings) {
    REQUIRE_GPU();
    ValidationResult r = validate_fixture("good.cu");
    ASSERT_EQ(r.status, Status::ok) << r.log;
    EXPECT_GE(r.trials, 5);
    EXPECT_LT(r.max_abs_diff, 1e-4);
    EXPECT_GT(r.kernel_us, 0);
    EXPECT_GT(r.reference_us, 0);
    EXPECT_NEAR(r.speedup, r.reference_us / r.kernel_us, 1e-9);
    EXPECT_FALSE(r.suspicious);
    EXPECT_EQ(r.details["timing"]["trials"], 30);
    EXPECT_GE(r.details["timing"]["l2_flush_bytes"].get<double>(), 2.0 * gelu_validator().device().l2_bytes);
    EXPECT_EQ(r.details["timing"]["l2_flush"], "read");
    EXPECT_EQ(r.details["timing"]["buffer_copies"], 4);
    EXPECT_EQ(r.details["timing"]["kernel"]["per_copy_median_us"].size(), 4u);
    // Both shape sets were checked, some at reused addresses with fresh values.
    bool set0 = false, set1 = false, refill = false;
    for (const auto& c : r.details["checks"]) {
        set0 = set0 || c["shape_set"] == 0;
        set1 = set1 || c["shape_set"] == 1;
        refill = refill || c.value("refill_same_addresses", false);
    }
    EXPECT_TRUE(set0 && set1 && refill);
}

TEST_P(Fixtures, Status) {
    REQUIRE_GPU();
    const Case& c = GetParam();
    ValidationResult r = validate_fixture(c.kernel);
    EXPECT_EQ(status_name(r.status), std::string(status_name(c.expected))) << c.kernel << ":\n" << r.log;
    EXPECT_NE(r.log.find(c.log_contains), std::string::npos) << c.kernel << ":\n" << r.log;
    // Whatever the last kernel did, the next validation works normally.
    ValidationResult good = validate_fixture("good.cu");
    EXPECT_EQ(good.status, Status::ok) << "after " << c.kernel << ": " << good.log;
}

INSTANTIATE_TEST_SUITE_P(
    Kernels, Fixtures,
    ::testing::Values(Case{"wrong_math.cu", Status::mismatch, "first mismatch at index"},
                      Case{"compile_error.cu", Status::compile_error, "undefined_function"},
                      Case{"no_entry.cu", Status::compile_error, "kevo_forward"},
                      Case{"crash_segfault.cu", Status::runtime_error, "signal 11"},
                      Case{"illegal_address.cu", Status::runtime_error, "cudaErrorIllegalAddress"},
                      Case{"hang.cu", Status::timeout, "watchdog"},
                      Case{"out_of_memory.cu", Status::runtime_error, "returned 3"},
                      Case{"returns_error.cu", Status::runtime_error, "returned 7"},
                      Case{"partial_write.cu", Status::mismatch, "got nan"},
                      Case{"precision_fp16.cu", Status::mismatch, "differs from the reference"},
                      Case{"cheat_zero.cu", Status::mismatch, "expected"},
                      Case{"cheat_cache_pointer.cu", Status::mismatch, "differs from the reference"},
                      Case{"cheat_cache_shape.cu", Status::mismatch, "differs from the reference"},
                      Case{"cheat_side_stream.cu", Status::rejected, "stream"},
                      Case{"cheat_host_thread.cu", Status::rejected, "stream"},
                      Case{"cheat_default_stream.cu", Status::rejected, "stream"},
                      Case{"cheat_modify_input.cu", Status::rejected, "modified input 'x'"},
                      Case{"cheat_stale_memory.cu", Status::mismatch, "differs from the reference"}),
    [](const ::testing::TestParamInfo<Case>& info) {
        std::string n = info.param.kernel;
        return n.substr(0, n.size() - 3);
    });

TEST(ValidateGpu, SeveralOutputsHalfAndIntegerDtypes) {
    REQUIRE_GPU();
    ValidateOptions o;
    o.timing_trials = 20;
    Validator v(load_task(kData / "multi_out" / "task.json"), o);
    ValidationResult good = v.validate(read_file(kData / "multi_out" / "kernels" / "good.cu"));
    EXPECT_EQ(good.status, Status::ok) << good.log;
    ValidationResult bad = v.validate(read_file(kData / "multi_out" / "kernels" / "off_by_one.cu"));
    EXPECT_EQ(bad.status, Status::mismatch);
    EXPECT_NE(bad.log.find("output 'shifted'"), std::string::npos) << bad.log;
}

TEST(ValidateGpu, SuspiciousSpeedupIsFlagged) {
    REQUIRE_GPU();
    ValidateOptions o;
    o.timing_trials = 20;
    o.suspicious_speedup = 0.01;  // any real speedup is "suspicious" at this threshold
    Validator v(load_task(kData / "gelu_bias" / "task.json"), o);
    ValidationResult r = v.validate(read_file(kData / "gelu_bias" / "kernels" / "good.cu"));
    ASSERT_EQ(r.status, Status::ok) << r.log;
    EXPECT_TRUE(r.suspicious);
    EXPECT_NE(r.log.find("suspicious"), std::string::npos);
}

TEST(ValidateGpu, MemsetFlushAndOneBufferCopyAlsoTime) {
    REQUIRE_GPU();
    ValidateOptions o;
    o.timing_trials = 20;
    o.l2_flush = "write";
    o.timing_copies = 1;
    Validator v(load_task(kData / "gelu_bias" / "task.json"), o);
    ValidationResult r = v.validate(read_file(kData / "gelu_bias" / "kernels" / "good.cu"));
    ASSERT_EQ(r.status, Status::ok) << r.log;
    EXPECT_GT(r.speedup, 0);
    EXPECT_EQ(r.details["timing"]["l2_flush"], "write");
    EXPECT_EQ(r.details["timing"]["buffer_copies"], 1);
}

// Tasks of other shapes than the elementwise fixtures: reductions with a 0-dim, an int64 and a bool
// output; bfloat16 LayerNorm with the default tolerance; an fp32 matrix product against cuBLAS.
class OtherTasks : public ::testing::TestWithParam<const char*> {};

TEST_P(OtherTasks, CorrectKernelIsOk) {
    REQUIRE_GPU();
    ValidateOptions o;
    o.timing_trials = 20;
    Validator v(load_task(kData / GetParam() / "task.json"), o);
    ValidationResult r = v.validate(read_file(kData / GetParam() / "kernels" / "good.cu"));
    ASSERT_EQ(r.status, Status::ok) << r.log;
    EXPECT_GE(r.trials, 5);
    EXPECT_GT(r.speedup, 0);
    EXPECT_EQ(r.log.find("warning"), std::string::npos) << r.log;  // no output is constant
}

INSTANTIATE_TEST_SUITE_P(Validate, OtherTasks, ::testing::Values("reductions", "layernorm_bf16", "matmul"),
                         [](const auto& info) { return std::string(info.param); });
