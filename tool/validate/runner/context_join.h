// The end of a timed call: when all the work of the process's CUDA context has ended, not only the
// work of the stream the call was given. A kernel that puts part of its work on a stream of its
// own (after behaving while its first calls were watched) would otherwise have that part run after
// the call's end event, during the next call's L2 flush, where nothing times it: on the H200 that
// hid about 16% of a 3 us shape set. Before its end event, a timed call's stream waits for an
// event recorded over the whole context (cuCtxRecordEvent: every stream of the primary context,
// non-blocking ones and the legacy stream included). Both sides of a speedup end their calls so:
// the candidate process its kernel's calls and its empty-call calibration, the judge the
// reference's calls and its own empty calls, so what the join costs cancels in the launch-cost
// correction. Where the driver lacks cuCtxRecordEvent (before CUDA 12.5) the event is recorded on
// the legacy default stream, which waits for every blocking stream only (`mode` says which).
// Work launched after the join by another thread or a timer is closed by the confinement: a
// process that loads candidate code can start neither (sandbox/confine.h).
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

namespace kevo_runner {

class ContextJoin {
public:
    // After the context exists (the first CUDA call), on the thread that times.
    bool init() {
        if (cudaEventCreateWithFlags(&event_, cudaEventDisableTiming) != cudaSuccess) return false;
        cudaDriverEntryPointQueryResult q;
        void* get = nullptr;
        void* rec = nullptr;
        if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &get, 12000, cudaEnableDefault, &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess &&
            cudaGetDriverEntryPointByVersion("cuCtxRecordEvent", &rec, 12050, cudaEnableDefault, &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess && reinterpret_cast<decltype(&::cuCtxGetCurrent)>(get)(&ctx_) == CUDA_SUCCESS && ctx_) {
            record_ = reinterpret_cast<decltype(&::cuCtxRecordEvent)>(rec);
            mode_ = "context";
        } else {
            mode_ = "legacy stream";
        }
        cudaGetLastError();
        return true;
    }
    // Makes `stream` wait for all the work the context holds now. Fails where the context cannot be
    // joined (e.g. the candidate left one of its streams capturing a graph).
    cudaError_t operator()(cudaStream_t stream) const {
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
    const char* mode_ = "none";
};

}  // namespace kevo_runner
