"""gpuscout.cli._render: see docs/architecture.md."""
