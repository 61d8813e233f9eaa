"""The names the Vulkan backend uses, said once."""

#: The library every Vulkan device reports (the seed's "Vulkan").
LIBRARY = "Vulkan"
#: ggml-vulkan's device filter (indices into the loader's enumeration).
VISIBLE_ENV = "GGML_VK_VISIBLE_DEVICES"
