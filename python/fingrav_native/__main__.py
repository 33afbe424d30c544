"""``python -m fingrav_native`` is the ``fingrav`` command."""

from .cli import main

raise SystemExit(main())
