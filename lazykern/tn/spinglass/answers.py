"""Reading a solver's answer: a device scalar on the host, and the warning for rounded couplings."""

from __future__ import annotations

import math
from typing import Any

from ...errors import LazykernWarning, warn_user
from .. import _exact


def warn_rounded(fit: _exact.Fitted, solver: str, effect: str) -> None:
    """A LazykernWarning where the couplings were rounded (floats at their binary value whose exact numerators
    pass 62 bits): which rounding, and what states within its tolerance of E_0 do to ``solver``'s answer."""
    if not fit.exact:
        warn_user(
            f"{solver}: these couplings are not exact in {fit.dtype} (their exact integer numerators need more "
            f"than 62 bits): each was rounded to a multiple of 2^{math.log2(fit.unit):.0f} and ties decided "
            f"between the rounded energies. States within {fit.tolerance:.3g} of E_0 {effect}",
            LazykernWarning,
        )


def item(x: Any) -> Any:
    if hasattr(x, "copy_to_host"):
        x = x.copy_to_host()
    return x.item() if hasattr(x, "item") else x
