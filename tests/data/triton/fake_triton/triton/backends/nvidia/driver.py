# As in Triton 3.6: the CUDA driver loads libcuda and asks the GPU in its constructor; its type
# mapping needs neither.
def ty_to_cpp(ty):
    if ty.startswith("*"):
        return "CUdeviceptr"
    return {"i1": "int8_t", "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t", "u32": "uint32_t",
            "u64": "uint64_t", "fp16": "double", "bf16": "double", "fp32": "double", "f32": "double", "fp64": "double"}[ty]


class CudaDriver:
    def __init__(self):
        raise RuntimeError("the CUDA driver needs a GPU (libcuda, a device)")

    def map_python_to_cpp_type(self, ty):
        return ty_to_cpp(ty)

    def get_current_target(self):
        raise RuntimeError("the CUDA driver needs a GPU")
