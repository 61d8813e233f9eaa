"""gpuscout._host: see docs/architecture.md."""
