"""gpuscout._layout: see docs/architecture.md."""
