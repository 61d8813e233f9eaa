"""gpuscout._recording: see docs/architecture.md."""
