"""``python -m csibench``: same as the ``csibench`` command."""

from csibench.cli import main

raise SystemExit(main())
