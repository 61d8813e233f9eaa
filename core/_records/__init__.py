"""gpuscout._records: see docs/architecture.md."""
