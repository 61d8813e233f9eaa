"""The names the ROCm backend uses, said once."""

#: The library every ROCm device reports (the seed's "ROCm").
LIBRARY = "ROCm"
#: ROCr's device filter (Linux); the runtime under HIP reads it first.
ROCR = "ROCR_VISIBLE_DEVICES"
#: HIP's device filter, applied to what ROCr left.
HIP = "HIP_VISIBLE_DEVICES"
#: HIP also honours CUDA's variable.
CUDA = "CUDA_VISIBLE_DEVICES"
#: The OpenCL/HIP ordinal variable.
OPENCL_ORDINAL = "GPU_DEVICE_ORDINAL"
#: The gfx version override libhsakmt applies.
OVERRIDE = "HSA_OVERRIDE_GFX_VERSION"
#: What a deep-initialisation check in a child adds (the seed's AddInitValidation).
INIT_ENV = {"GGML_CUDA_INIT": "1"}
