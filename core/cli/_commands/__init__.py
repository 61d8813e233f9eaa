"""gpuscout.cli._commands: see docs/architecture.md."""
