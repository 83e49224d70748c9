// GPU memory shared by admission (issue 36, validate/gpu_ledger.h): two validations of a 6.4 GB
// problem at once, each in its own judge process, under a ledger budget made small on purpose
// ($KERNELEVO_GPU_MEMORY_BYTES = 48 GB, in a lock directory of the test's own): their working sets
// (about 26 GB each with one timing copy) together exceed it. Both must finish ok, and the judges'
// kept timing copies together stay within a quarter of the budget (the per-device bound). Skips
// without a CUDA device.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <thread>

#include "common/fs.h"
#include "validate/gpu_ledger.h"
#include "validate/validate.h"

using namespace kevo;

namespace {
const fs::path kData = fs::path(KEVO_TEST_DATA_DIR);
constexpr uint64_t kBudgetTotal = 48ull << 30;
}  // namespace

TEST(LedgerGpu, TwoValidationsBeyondTheBudgetBothFinish) {
    char tmpl[] = "/tmp/kevo_ledger_gpu_XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    setenv("KERNELEVO_LOCK_DIR", dir.c_str(), 1);  // passed on to the judges (validate.cpp)
    setenv("KERNELEVO_GPU_MEMORY_BYTES", std::to_string(kBudgetTotal).c_str(), 1);
    ValidateOptions o;
    o.timeout_s = 60;
    o.timing_trials = 20;
    {
        Validator a(load_task(kData / "kb_relu" / "task.json"), o);
        if (!a.device().present) {
            fs::remove_all(dir);
            GTEST_SKIP() << "no CUDA device: " << a.device().error;
        }
        Validator b(load_task(kData / "kb_relu" / "task.json"), o);
        const std::string src = read_file(kData / "kb_relu" / "relu.cu");
        ValidationResult ra, rb;
        std::thread ta([&] { ra = a.validate(src); });
        std::thread tb([&] { rb = b.validate(src); });
        ta.join();
        tb.join();
        EXPECT_TRUE(ra.ok()) << status_name(ra.status) << ": " << ra.log;
        EXPECT_TRUE(rb.ok()) << status_name(rb.status) << ": " << rb.log;
        // Both judges still live (their validators do): what they keep is within the device's bound.
        const auto& d = a.device();
        MemoryLedger ledger(d.uuid.empty() ? "gpu" + std::to_string(d.index) : d.uuid, UINT64_MAX, dir);
        EXPECT_LE(ledger.reserved("kept"), ledger.budget() / 4);
        EXPECT_EQ(ledger.reserved("job"), 0u);  // given back at each job's end
        for (const auto* r : {&ra, &rb})
            if (r->details.contains("timing"))
                for (const auto& s : r->details["timing"]["sets"]) std::printf("buffer_copies %d\n", s.value("buffer_copies", -1));
    }
    unsetenv("KERNELEVO_GPU_MEMORY_BYTES");
    unsetenv("KERNELEVO_LOCK_DIR");
    fs::remove_all(dir);
}
