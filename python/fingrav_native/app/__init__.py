"""What a user runs: the ``fingrav`` command (``cli``), the demo (``demo``) and the figures (``plot``, matplotlib)."""
