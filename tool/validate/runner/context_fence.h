// The bounds of a timed call over the whole CUDA context, not only the stream the call was given.
// A kernel that puts its work on a stream of its own (after behaving while its first calls were
// watched) escapes a timer on the given stream both ways: its work starts as soon as it is
// launched, while the GPU still runs the previous call's L2 flush (the host enqueues a batch's
// calls far ahead of the GPU), and it may end after the call's end event. Measured on the H200
// (gelu_bias 4096x4096, all work on a private non-blocking stream): 2.1 us per call instead of 35.
// So a timed call is fenced on both sides:
//   begin(start): right after the start event, every stream of the context, present or created
//     later, waits for it (cuCtxWaitEvent): nothing the call launches runs before its start;
//   end(stream): before the end event, the given stream waits for all the work the context holds
//     (cuCtxRecordEvent): nothing the call launched runs after its end.
// Both need CUDA 12.5+; with an older driver the legacy default stream stands in for the context
// (it orders the blocking streams only; `mode` says which). On the H200 the fences add nothing to
// an empty call (2.98 us median with and without). Both sides of a speedup fence their calls:
// the candidate process its kernel's calls and its empty-call calibration, the judge the
// reference's calls and its own empty calls. Work launched later by another thread or a timer is
// closed by the confinement: a process that loads candidate code can start neither
// (sandbox/confine.h).
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

namespace kevo_runner {

class ContextFence {
public:
    // After the context exists (the first CUDA call), on the thread that times.
    bool init() {
        if (cudaEventCreateWithFlags(&event_, cudaEventDisableTiming) != cudaSuccess) return false;
        cudaDriverEntryPointQueryResult q;
        void* get = nullptr;
        void* rec = nullptr;
        void* wait = nullptr;
        if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &get, 12000, cudaEnableDefault, &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess &&
            cudaGetDriverEntryPointByVersion("cuCtxRecordEvent", &rec, 12050, cudaEnableDefault, &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess &&
            cudaGetDriverEntryPointByVersion("cuCtxWaitEvent", &wait, 12050, cudaEnableDefault, &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess && reinterpret_cast<decltype(&::cuCtxGetCurrent)>(get)(&ctx_) == CUDA_SUCCESS && ctx_) {
            record_ = reinterpret_cast<decltype(&::cuCtxRecordEvent)>(rec);
            wait_ = reinterpret_cast<decltype(&::cuCtxWaitEvent)>(wait);
            mode_ = "context";
        } else {
            mode_ = "legacy stream";
        }
        cudaGetLastError();
        return true;
    }
    // After the call's start event: all work the context is given from now on waits for it.
    cudaError_t begin(cudaEvent_t start) const {
        if (wait_) return wait_(ctx_, reinterpret_cast<CUevent>(start)) == CUDA_SUCCESS ? cudaSuccess : cudaErrorStreamCaptureUnsupported;
        return cudaStreamWaitEvent(cudaStreamLegacy, start, 0);
    }
    // Before the call's end event: `stream` waits for all the work the context holds now. Fails
    // where the context cannot be fenced (e.g. the candidate left one of its streams capturing).
    cudaError_t end(cudaStream_t stream) const {
        if (!event_) return cudaErrorNotReady;
        if (record_) {
            if (record_(ctx_, reinterpret_cast<CUevent>(event_)) != CUDA_SUCCESS) return cudaErrorStreamCaptureUnsupported;
        } else {
            cudaError_t e = cudaEventRecord(event_, cudaStreamLegacy);
            if (e != cudaSuccess) return e;
        }
        return cudaStreamWaitEvent(stream, event_, 0);
    }
    const char* mode() const { return mode_; }

private:
    cudaEvent_t event_ = nullptr;
    CUcontext ctx_ = nullptr;
    decltype(&::cuCtxRecordEvent) record_ = nullptr;
    decltype(&::cuCtxWaitEvent) wait_ = nullptr;
    const char* mode_ = "none";
};

}  // namespace kevo_runner
