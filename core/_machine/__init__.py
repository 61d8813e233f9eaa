"""gpuscout._machine: see docs/architecture.md."""
