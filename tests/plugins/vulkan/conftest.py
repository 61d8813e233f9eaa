"""The lavapipe fixtures (lavapipe_icd, lavapipe_env) live in the top-level conftest."""
