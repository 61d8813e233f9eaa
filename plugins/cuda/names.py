"""The names the CUDA backend uses, said once."""

#: The library every CUDA device reports (the seed's "CUDA").
LIBRARY = "CUDA"
#: The CUDA runtime's device filter.
VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"
#: How the CUDA runtime orders devices ("FASTEST_FIRST" by default, or "PCI_BUS_ID").
ORDER_ENV = "CUDA_DEVICE_ORDER"
#: What a deep-initialisation check in a child adds (the seed's AddInitValidation).
INIT_ENV = {"GGML_CUDA_INIT": "1"}
