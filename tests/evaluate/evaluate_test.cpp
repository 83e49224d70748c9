// The evaluator seam's types: what crosses between the validator, the queue and the search.
#include <gtest/gtest.h>

#include "common/error.h"
#include "evaluate/evaluator.h"

namespace kevo {
// Status in gtest's messages by name.
void PrintTo(Status s, std::ostream* os) { *os << status_name(s); }
}  // namespace kevo

using namespace kevo;

namespace {
const Status kAll[] = {Status::ok,      Status::compile_error, Status::runtime_error, Status::mismatch,
                       Status::timeout, Status::rejected,      Status::no_device};
}  // namespace

// The names are the stored and sent form (store columns, queue results, --json): each one parses
// back to its status, and they are the ones the stores and reports already hold.
TEST(Status, EveryNameParsesBackAndUnknownNamesAreRefused) {
    for (Status s : kAll) EXPECT_EQ(parse_status(status_name(s)), s) << status_name(s);
    EXPECT_STREQ(status_name(Status::ok), "ok");
    EXPECT_STREQ(status_name(Status::compile_error), "compile_error");
    EXPECT_STREQ(status_name(Status::no_device), "no_device");
    // The search's own states are not verdicts.
    EXPECT_THROW(parse_status("pending"), UsageError);
    EXPECT_THROW(parse_status("duplicate"), UsageError);
    EXPECT_THROW(parse_status(""), UsageError);
}

// An Evaluation that nobody filled in is a failure, never a success.
TEST(Evaluation, DefaultsToARuntimeErrorThatIsNotOk) {
    Evaluation e;
    EXPECT_EQ(e.status, Status::runtime_error);
    EXPECT_FALSE(e.ok());
    e.status = Status::ok;
    EXPECT_TRUE(e.ok());
}

TEST(DeviceInfo, TravelsAsJsonFieldForField) {
    DeviceInfo d;
    d.present = true;
    d.index = 1;
    d.name = "NVIDIA H200";
    d.cc_major = 9;
    d.cc_minor = 0;
    d.sm_count = 132;
    d.mem_bandwidth_gbs = 4800;
    d.total_mem = int64_t{141} << 30;
    d.l2_bytes = 60 << 20;
    d.smem_per_block = 49152;
    d.smem_per_block_optin = 232448;
    d.smem_per_sm = 233472;
    d.driver_version = 13000;
    d.runtime_version = 12080;
    d.uuid = "GPU-1234";
    const nlohmann::json j = d.to_json();
    EXPECT_EQ(j["arch"], "sm_90");
    const DeviceInfo back = DeviceInfo::from_json(nlohmann::json::parse(j.dump()));
    EXPECT_EQ(back.to_json(), j);
    // No device: only why.
    DeviceInfo none;
    none.error = "no CUDA driver";
    EXPECT_EQ(none.to_json(), (nlohmann::json{{"present", false}, {"error", "no CUDA driver"}}));
    EXPECT_FALSE(DeviceInfo::from_json(none.to_json()).present);
}

// The wire form without a compiler (tests/validate's compile_test does it after a real nvcc run).
TEST(CompileResult, WireFormKeepsTheFieldsAndTheKernelsButNotTheLocalPaths) {
    CompileResult a;
    a.ok = true;
    a.library = "/cache/kernels/abc.so";
    a.library_sha256 = "abc";
    a.log = "warning: x";
    a.seconds = 1.5;
    a.cached = true;
    a.limit_hit = true;
    a.source_hash = "def";
    a.arch = "sm_90";
    a.backend = "triton";
    a.generated_source = "// generated";
    a.backend_info = {{"triton_version", "3.6.0"}};
    KernelResources k;
    k.name = "gelu_kernel(float const*, float*, int)";
    k.mangled = "_Z11gelu_kernelPKfPfi";
    k.arch = "sm_90";
    k.registers = 18;
    k.smem_bytes = 4096;
    k.spill_stores = 2;
    a.kernels.push_back(k);
    const nlohmann::json j = compile_result_to_json(a);
    EXPECT_FALSE(j.contains("library"));
    EXPECT_FALSE(j.contains("library_sha256"));
    const CompileResult b = compile_result_from_json(nlohmann::json::parse(j.dump()));
#define KEVO_X(f) EXPECT_EQ(b.f, a.f) << #f;
    KEVO_COMPILE_RESULT_WIRE_FIELDS(KEVO_X)
#undef KEVO_X
    ASSERT_EQ(b.kernels.size(), 1u);
    EXPECT_EQ(b.kernels[0].to_json(), k.to_json());
    EXPECT_EQ(b.kernels[0].registers, 18);
    EXPECT_TRUE(b.library.empty());
    EXPECT_TRUE(b.library_sha256.empty());
}
