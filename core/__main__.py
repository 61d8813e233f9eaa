"""``python -m gpuscout``: the same as the ``gpuscout`` command."""

from gpuscout.cli import main

raise SystemExit(main())
