// KernelEvo::runtime dispatch decisions, with the device architecture injected (no GPU needed).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "kernelevo/runtime.h"

namespace {

int g_calls80 = 0, g_calls90 = 0;
extern "C" int fake80(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t) { return ++g_calls80, 0; }
extern "C" int fake90(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t) { return ++g_calls90, 0; }

// gelu_bias-like: x[M,N], bias[N] -> y[M,N]; plus a literal dim on a third input c[4].
const kevo_tensor_spec kIn[] = {{"x", KEVO_FLOAT32, 2, {-1, -2}}, {"bias", KEVO_FLOAT32, 1, {-2}}, {"c", KEVO_INT32, 1, {4}}};
const kevo_tensor_spec kOut[] = {{"y", KEVO_FLOAT32, 2, {-1, -2}}, {"rowsum", KEVO_FLOAT64, 1, {-1}}};
const char* const kSym[] = {"M", "N"};
const kevo_kernel_entry kKernels[] = {{"sm_80", 80, &fake80}, {"sm_90", 90, &fake90}};
kevo_function g_fn = {"test_fn", 3, 2, 2, 2, kIn, kOut, kSym, kKernels, "sm_80,sm_90", 0, 0, 0};
const int g_registered = kevo_register_function(&g_fn);

alignas(16) float g_data[64 * 64];

kevo_tensor make(int32_t dtype, std::initializer_list<int64_t> sizes, void* data = g_data) {
    kevo_tensor t{};
    t.data = data;
    t.dtype = dtype;
    t.ndim = static_cast<int32_t>(sizes.size());
    int i = 0;
    for (auto s : sizes) t.sizes[i++] = s;
    int64_t stride = 1;
    for (int d = t.ndim - 1; d >= 0; --d) t.strides[d] = stride, stride *= t.sizes[d];
    return t;
}

class Dispatch : public ::testing::Test {
protected:
    void SetUp() override {
        (void)g_registered;
        kevo_set_disabled(0);
        kevo_set_device_cc(90);
        in[0] = make(KEVO_FLOAT32, {8, 12});
        in[1] = make(KEVO_FLOAT32, {12});
        in[2] = make(KEVO_INT32, {4});
    }
    void TearDown() override {
        kevo_set_device_cc(-1);
        kevo_set_disabled(-1);
    }
    kevo_forward_fn select(int device = 0) { return kevo_select(&g_fn, device, in, 3, out, 2); }
    kevo_tensor in[3];
    kevo_tensor out[2];
};

TEST_F(Dispatch, PicksTheKernelOfTheDeviceArchitecture) {
    EXPECT_EQ(select(), &fake90);
    EXPECT_STREQ(kevo_last_impl("test_fn"), "sm_90");
    EXPECT_NE(std::string(kevo_last_reason("test_fn")).find("sm_90"), std::string::npos);
    kevo_set_device_cc(80);
    EXPECT_EQ(select(), &fake80);
    EXPECT_STREQ(kevo_last_impl("test_fn"), "sm_80");
}

TEST_F(Dispatch, FillsContiguousOutputsFromTheSymbols) {
    ASSERT_EQ(select(), &fake90);
    EXPECT_EQ(out[0].ndim, 2);
    EXPECT_EQ(out[0].sizes[0], 8);
    EXPECT_EQ(out[0].sizes[1], 12);
    EXPECT_EQ(out[0].strides[0], 12);
    EXPECT_EQ(out[0].strides[1], 1);
    EXPECT_EQ(out[0].dtype, KEVO_FLOAT32);
    EXPECT_EQ(out[0].data, nullptr);
    EXPECT_EQ(out[1].ndim, 1);
    EXPECT_EQ(out[1].sizes[0], 8);
    EXPECT_EQ(out[1].dtype, KEVO_FLOAT64);
}

TEST_F(Dispatch, BinaryCompatibleKernelServesANewerMinor) {
    // sm_86 and sm_89 have no kernel of their own: sm_80 machine code runs on them.
    for (int cc : {86, 89}) {
        kevo_set_device_cc(cc);
        EXPECT_EQ(select(), &fake80) << cc;
        EXPECT_STREQ(kevo_last_impl("test_fn"), "sm_80");
        std::string why = kevo_last_reason("test_fn");
        EXPECT_NE(why.find("binary compatible"), std::string::npos) << why;
        EXPECT_NE(why.find("no sm_" + std::to_string(cc) + " kernel"), std::string::npos) << why;
    }
    // A dedicated kernel always wins.
    kevo_set_device_cc(90);
    EXPECT_EQ(select(), &fake90);
    EXPECT_EQ(std::string(kevo_last_reason("test_fn")).find("compatible"), std::string::npos);
}

TEST_F(Dispatch, OtherArchitectureFallsBack) {
    // Another major version (or an older minor) has no compatible kernel.
    for (int cc : {75, 100}) {
        kevo_set_device_cc(cc);
        EXPECT_EQ(select(), nullptr) << cc;
        EXPECT_STREQ(kevo_last_impl("test_fn"), "reference");
        std::string why = kevo_last_reason("test_fn");
        EXPECT_NE(why.find("sm_" + std::to_string(cc)), std::string::npos) << why;
        EXPECT_NE(why.find("sm_80,sm_90"), std::string::npos) << why;
    }
}

TEST(DispatchArchSpecific, AnArchSpecificKernelRunsOnlyOnItsOwnCc) {
    static const kevo_tensor_spec in[] = {{"x", KEVO_FLOAT32, 1, {4}}};
    static const kevo_tensor_spec out[] = {{"y", KEVO_FLOAT32, 1, {4}}};
    static const kevo_kernel_entry kernels[] = {{"sm_86a", 86, &fake80}};
    static kevo_function f = {"arch_specific_fn", 1, 1, 0, 1, in, out, nullptr, kernels, "sm_86a", 0, 0, 0};
    alignas(16) static float data[4];
    kevo_tensor t{};
    t.data = data;
    t.ndim = 1;
    t.dtype = KEVO_FLOAT32;
    t.sizes[0] = 4;
    t.strides[0] = 1;
    kevo_tensor o{};
    kevo_set_device_cc(86);
    EXPECT_EQ(kevo_select(&f, 0, &t, 1, &o, 1), &fake80);
    kevo_set_device_cc(89);
    EXPECT_EQ(kevo_select(&f, 0, &t, 1, &o, 1), nullptr);
    kevo_set_device_cc(-1);
}

TEST_F(Dispatch, NoGpuFallsBack) {
    kevo_set_device_cc(0);
    EXPECT_EQ(select(), nullptr);
    EXPECT_NE(std::string(kevo_last_reason("test_fn")).find("not usable"), std::string::npos);
}

TEST_F(Dispatch, CpuTensorsAndMixedDevicesFallBack) {
    EXPECT_EQ(select(-1), nullptr);
    EXPECT_NE(std::string(kevo_last_reason("test_fn")).find("not on a CUDA device"), std::string::npos);
    EXPECT_EQ(select(-2), nullptr);
    EXPECT_NE(std::string(kevo_last_reason("test_fn")).find("different CUDA devices"), std::string::npos);
}

TEST_F(Dispatch, DisableSwitchForcesTheReference) {
    kevo_set_disabled(1);
    EXPECT_EQ(select(), nullptr);
    EXPECT_NE(std::string(kevo_last_reason("test_fn")).find("KERNELEVO_DISABLE"), std::string::npos);
    kevo_set_disabled(0);
    EXPECT_EQ(select(), &fake90);
}

TEST_F(Dispatch, DisableSwitchReadsTheEnvironment) {
    setenv("KERNELEVO_DISABLE", "1", 1);
    kevo_set_disabled(-1);
    EXPECT_EQ(kevo_disabled(), 1);
    setenv("KERNELEVO_DISABLE", "0", 1);
    kevo_set_disabled(-1);
    EXPECT_EQ(kevo_disabled(), 0);
    setenv("KERNELEVO_DISABLE", "false", 1);
    kevo_set_disabled(-1);
    EXPECT_EQ(kevo_disabled(), 0);
    unsetenv("KERNELEVO_DISABLE");
    kevo_set_disabled(-1);
    EXPECT_EQ(kevo_disabled(), 0);
}

TEST_F(Dispatch, DtypeMismatchFallsBack) {
    in[1].dtype = KEVO_FLOAT16;
    EXPECT_EQ(select(), nullptr);
    std::string why = kevo_last_reason("test_fn");
    EXPECT_NE(why.find("'bias' is float16"), std::string::npos) << why;
}

TEST_F(Dispatch, RankMismatchFallsBack) {
    in[0] = make(KEVO_FLOAT32, {2, 4, 12});
    EXPECT_EQ(select(), nullptr);
    EXPECT_NE(std::string(kevo_last_reason("test_fn")).find("3 dimensions"), std::string::npos);
}

TEST_F(Dispatch, InconsistentSymbolFallsBack) {
    in[1] = make(KEVO_FLOAT32, {13});  // N is 12 in x
    EXPECT_EQ(select(), nullptr);
    std::string why = kevo_last_reason("test_fn");
    EXPECT_NE(why.find("'bias'"), std::string::npos) << why;
    EXPECT_NE(why.find("N"), std::string::npos) << why;
}

TEST_F(Dispatch, LiteralSizeMismatchFallsBack) {
    in[2] = make(KEVO_INT32, {5});
    EXPECT_EQ(select(), nullptr);
    EXPECT_NE(std::string(kevo_last_reason("test_fn")).find("'c'"), std::string::npos);
}

TEST_F(Dispatch, NonContiguousFallsBack) {
    std::swap(in[0].strides[0], in[0].strides[1]);  // a transposed view
    in[0].strides[0] = 1;
    in[0].strides[1] = 8;
    EXPECT_EQ(select(), nullptr);
    EXPECT_NE(std::string(kevo_last_reason("test_fn")).find("not contiguous"), std::string::npos);
}

TEST_F(Dispatch, SizeOneDimensionsIgnoreStrides) {
    in[0] = make(KEVO_FLOAT32, {1, 12});
    in[0].strides[0] = 999;  // torch leaves odd strides on size-1 dims of contiguous tensors
    EXPECT_EQ(select(), &fake90);
}

TEST_F(Dispatch, MisalignedFallsBack) {
    in[0].data = reinterpret_cast<char*>(g_data) + 4;
    EXPECT_EQ(select(), nullptr);
    EXPECT_NE(std::string(kevo_last_reason("test_fn")).find("16-byte"), std::string::npos);
}

TEST_F(Dispatch, EmptyTensorFallsBack) {
    in[0] = make(KEVO_FLOAT32, {0, 12});
    EXPECT_EQ(select(), nullptr);
    EXPECT_NE(std::string(kevo_last_reason("test_fn")).find("no elements"), std::string::npos);
}

TEST_F(Dispatch, KernelFailureIsRecorded) {
    ASSERT_EQ(select(), &fake90);
    kevo_record_reference(&g_fn, KEVO_REASON_KERNEL_FAILED, -1, 7);
    EXPECT_STREQ(kevo_last_impl("test_fn"), "reference");
    EXPECT_NE(std::string(kevo_last_reason("test_fn")).find("return code 7"), std::string::npos);
}

TEST_F(Dispatch, CountsCalls) {
    const uint64_t k = kevo_kernel_calls("test_fn"), r = kevo_reference_calls("test_fn");
    select();
    select(-1);
    EXPECT_EQ(kevo_kernel_calls("test_fn"), k + 1);
    EXPECT_EQ(kevo_reference_calls("test_fn"), r + 1);
}

TEST(Runtime, UnknownFunction) {
    EXPECT_EQ(kevo_last_impl("no_such_function"), nullptr);
    EXPECT_STREQ(kevo_function_arches("no_such_function"), "");
    EXPECT_NE(std::string(kevo_last_reason("no_such_function")).find("no function"), std::string::npos);
}

TEST(Runtime, ParseArch) {
    EXPECT_EQ(kevo_parse_arch("sm_90"), 90);
    EXPECT_EQ(kevo_parse_arch("sm_90a"), 90);
    EXPECT_EQ(kevo_parse_arch("sm90"), 90);
    EXPECT_EQ(kevo_parse_arch("90"), 90);
    EXPECT_EQ(kevo_parse_arch("9.0"), 90);
    EXPECT_EQ(kevo_parse_arch("compute_80"), 80);
    EXPECT_EQ(kevo_parse_arch("sm_100f"), 100);
    EXPECT_EQ(kevo_parse_arch("nonsense"), 0);
    EXPECT_EQ(kevo_parse_arch("sm_"), 0);
    EXPECT_EQ(kevo_parse_arch(nullptr), 0);
}

TEST(Runtime, DeviceCcOverride) {
    kevo_set_device_cc(75);
    EXPECT_EQ(kevo_device_cc(0), 75);
    EXPECT_EQ(kevo_device_cc(3), 75);
    kevo_set_device_cc(0);
    EXPECT_EQ(kevo_device_cc(0), 0);
    kevo_set_device_cc(-1);
    // Real detection: 0 without a GPU, the real cc (cached) with one; asking twice agrees.
    const int a = kevo_device_cc(0);
    EXPECT_EQ(kevo_device_cc(0), a);
    EXPECT_GE(a, 0);
    EXPECT_EQ(kevo_device_cc(-1), 0);
}

}  // namespace
