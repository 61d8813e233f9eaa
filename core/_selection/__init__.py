"""gpuscout._selection: see docs/architecture.md."""
