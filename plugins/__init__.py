"""The built-in backends, one subpackage each: cuda, rocm, metal, vulkan."""

if __name__ != "gpuscout.plugins":
    # The folder "plugins" is only ever "gpuscout.plugins", even from the repository root.
    raise ImportError(f"'{__name__}' is not importable: this folder is 'gpuscout.plugins'")
