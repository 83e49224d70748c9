// A cached kernel that calls cuBLAS with the caller's handle (kernel ABI version 2): the generated
// library links KernelEvo::cublas (the handles, the workspace, CUDA::cublas) only then, so the
// user's program links and runs; a version-1 kernel's program does not link cuBLAS at all.
#include "cmake_project.h"

namespace kevo::cmake_test {

namespace {
// y = x * factor: a copy on the stream, then cublasSscal with the handle the caller bound to it.
std::string cublas_scale_kernel(float factor) {
    return "#include <cublas_v2.h>\n#include <kernelevo/abi.h>\n"
           "extern \"C\" int kevo_forward(const kevo_tensor* in, int, kevo_tensor* out, int, cudaStream_t s) {\n"
           "  const int n = (int)kevo_numel(&in[0]);\n"
           "  cublasHandle_t h = kevo_cublas_handle(s);\n"
           "  if (!h) return 2;\n"
           "  if (cudaMemcpyAsync(out[0].data, in[0].data, n * sizeof(float), cudaMemcpyDeviceToDevice, s) != cudaSuccess) return 3;\n"
           "  const float f = " + std::to_string(factor) + "f;\n"
           "  return cublasSscal(h, n, &f, (float*)out[0].data, 1) != CUBLAS_STATUS_SUCCESS;\n}\n";
}

// Whether the user's program is linked with KernelEvo::cublas (its archive on the link line).
bool links_kernelevo_cublas(const fs::path& build) { return contains(read_file(build / "build.ninja"), "libkernelevo_cublas.a"); }
}  // namespace

TEST_F(CMakeProject, AKernelCallingCublasLinksKernelEvoCublasAndRuns) {
    Outcome r = configure({"-DCMAKE_CUDA_ARCHITECTURES=90"});
    ASSERT_EQ(r.rc, 0) << r.out;
    store("sm_90", scale_kernel(2));
    r = configure();
    ASSERT_EQ(r.rc, 0) << r.out;
    r = build_all();
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_FALSE(links_kernelevo_cublas(build)) << "a version-1 kernel's program links cuBLAS";

    store("sm_90", cublas_scale_kernel(2));
    r = configure();
    ASSERT_EQ(r.rc, 0) << r.out;
    r = build_all();
    ASSERT_EQ(r.rc, 0) << r.out;  // kevo_cublas_handle and cublasSscal_v2 resolved at link time
    EXPECT_TRUE(links_kernelevo_cublas(build));
    Outcome app = run({(build / "app").string()});
    ASSERT_EQ(app.rc, 0) << app.out;
    // The program passes CPU tensors: the reference answers (the kernel runs in the GPU tests).
    EXPECT_TRUE(contains(app.out, "sum=20")) << app.out;
}

}  // namespace kevo::cmake_test
