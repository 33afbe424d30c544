"""When a campaign's runs are launched (``profile(phase=...)``), in a module that imports nothing heavy.

The ``fingrav`` command's parser lists these modes for ``--phase``; the
steering itself (:mod:`._phase`) needs numpy and scipy, which ``fingrav
--help`` must not wait for.
"""

from __future__ import annotations

from typing import Literal

#: ``profile(phase=...)``: "auto" steers where the sensor is predictable, "steered" also (and warns when
#: it must fall back), "random" is the paper's protocol (Section IV-A: runs at random phase).
Phase = Literal["auto", "steered", "random"]

#: The values of :data:`Phase`, in the order the command lists them.
PHASES: tuple[Phase, ...] = ("auto", "steered", "random")
