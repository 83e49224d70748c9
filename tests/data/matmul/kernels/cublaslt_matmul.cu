// C[M,N] = A[M,K] B[K,N] in fp32 through cublasLtMatmul, with the caller's handle and workspace
// (kernel ABI version 2, kernelevo/abi.h). Row-major C is column-major C^T = B^T A^T.
#include <cublasLt.h>

#include "kernelevo/abi.h"

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream) {
    if (n_in != 2 || n_out != 1 || in[0].dtype != KEVO_FLOAT32 || in[1].dtype != KEVO_FLOAT32) return 1;
    cublasLtHandle_t lt = kevo_cublaslt_handle(stream);
    size_t ws_bytes = 0;
    void* ws = kevo_cublas_workspace(stream, &ws_bytes);
    if (!lt || !ws) return 2;
    const uint64_t m = in[0].sizes[0], k = in[0].sizes[1], n = in[1].sizes[1];
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    int rc = 3;
    if (cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, n, k, n) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, k, m, k) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, n, m, n) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes) ==
            CUBLAS_STATUS_SUCCESS) {
        cublasLtMatmulHeuristicResult_t heur{};
        int found = 0;
        const float one = 1.0f, zero = 0.0f;
        if (cublasLtMatmulAlgoGetHeuristic(lt, op, lb, la, lc, lc, pref, 1, &heur, &found) == CUBLAS_STATUS_SUCCESS && found > 0)
            rc = cublasLtMatmul(lt, op, &one, in[1].data, lb, in[0].data, la, &zero, out[0].data, lc, out[0].data, lc, &heur.algo,
                                ws, ws_bytes, stream) == CUBLAS_STATUS_SUCCESS ? 0 : 4;
    }
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (op) cublasLtMatmulDescDestroy(op);
    return rc;
}
