"""``python -m fingrav_native`` is the ``fingrav`` command."""

from fingrav_native.app._cli import main

raise SystemExit(main())
