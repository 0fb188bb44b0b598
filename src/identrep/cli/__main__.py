"""``python -m identrep.cli``."""

from identrep.cli import main

raise SystemExit(main())
