// Candidates that call cuBLAS/cuBLASLt with the handles the runner made (kernel ABI version 2,
// kernelevo/abi.h), judged on the matmul task. Without a GPU the validator still compiles each and
// loads it in the sandbox (bubblewrap, seccomp, Landlock), which needs cuBLAS to load there and the
// runner to export the ABI's entry points; with one (the H200) they are validated for real.
#include <gtest/gtest.h>

#include "common/fs.h"
#include "task/task.h"
#include "validate/validate.h"

using namespace kevo;

namespace {
const fs::path kData = fs::path(KEVO_TEST_DATA_DIR) / "matmul";

Validator& matmul_validator() {
    static Validator* v = [] {
        ValidateOptions o;
        o.timeout_s = 60;
        o.timing_trials = 10;
        return new Validator(load_task(kData / "task.json"), o);
    }();
    return *v;
}

ValidationResult validate(const std::string& kernel) { return matmul_validator().validate(read_file(kData / "kernels" / kernel)); }

bool gpu() { return matmul_validator().device().present; }

// Correct where a GPU runs it; loaded in the sandbox (and not run) where none does.
void expect_correct_or_loaded(const ValidationResult& r) {
    if (gpu()) {
        EXPECT_EQ(r.status, Status::ok) << r.log;
        EXPECT_GT(r.speedup, 0);
    } else {
        EXPECT_EQ(r.status, Status::no_device) << status_name(r.status) << ": " << r.log;
        EXPECT_NE(r.log.find("loaded in the sandbox"), std::string::npos) << r.log;
    }
}
}  // namespace

TEST(ValidateCublas, SgemmWithTheRunnersHandleIsCorrect) { expect_correct_or_loaded(validate("cublas_sgemm.cu")); }

TEST(ValidateCublas, LtMatmulWithTheRunnersWorkspaceIsCorrect) { expect_correct_or_loaded(validate("cublaslt_matmul.cu")); }

TEST(ValidateCublas, OwnHandleIsACompileErrorPointingAtTheProvidedOne) {
    ValidationResult r = validate("cublas_own_handle.cu");
    EXPECT_EQ(r.status, Status::compile_error) << status_name(r.status) << ": " << r.log;
    EXPECT_NE(r.log.find("may not call cublasCreate"), std::string::npos) << r.log;
    EXPECT_NE(r.log.find("kevo_cublas_handle(stream)"), std::string::npos) << r.log;
}

// The runner binds its handle to the call's stream only and makes nothing once the candidate is
// loaded: a handle asked for on another stream is NULL (the fixture then returns 5).
TEST(ValidateCublas, HandleOnAnotherStreamIsRefusedAtRunTime) {
    if (!gpu()) GTEST_SKIP() << "no CUDA device: " << matmul_validator().device().error;
    ValidationResult r = validate("cublas_other_stream.cu");
    EXPECT_EQ(r.status, Status::runtime_error) << status_name(r.status) << ": " << r.log;
    EXPECT_NE(r.log.find("returned 5"), std::string::npos) << r.log;
}
