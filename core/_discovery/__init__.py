"""gpuscout._discovery: see docs/architecture.md."""
