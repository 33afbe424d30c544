"""Many GPUs (paper Section V-D): merged node profiles.

:func:`merge_ranks` puts every rank's profile on the root's host clock;
:class:`NodeProfile` holds the result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fingrav_native._lazy import attach

if TYPE_CHECKING:
    from fingrav_native.multi._merge import check_steady_states, merge_ranks
    from fingrav_native.multi._results import CHANNELS, NodeProfile, NodeView, SteadyCheck

# Each public name -> the private module that defines it. Loaded on first use (PEP 562, as scipy
# and scikit-image do), so importing one module of this package never imports the rest of it.
_WHERE = {
    "CHANNELS": "_results",
    "NodeProfile": "_results",
    "NodeView": "_results",
    "SteadyCheck": "_results",
    "check_steady_states": "_merge",
    "merge_ranks": "_merge",
}

__getattr__, __dir__, __all__ = attach(__name__, _WHERE)
