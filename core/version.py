"""The distribution's version, in a module that imports nothing (the package root and the
CLI's ``--version`` read it without loading pluggy or attrs)."""

VERSION = "0.1.0"
