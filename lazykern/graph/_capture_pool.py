"""The memory book of one capture: what the tropical API allocated while a stream was captured.

Allocations inside a lazykern capture are graph allocation nodes (see
:mod:`lazykern.memory`); the pool counts them, caps them (``max_bytes``) and can
be sealed so that a capture which should not allocate, or a recapture that
would allocate more, fails at once with a :class:`CaptureError` naming the
request instead of changing what the graph holds.
"""

from __future__ import annotations

from ..errors import CaptureError


class CapturePool:
    """Allocations reserved for one graph's capture, sealed once the capture ends.

    ``graph.capture(stream, pool=CapturePool())`` routes every lazykern
    allocation on ``stream`` inside the block here. After the block the pool is
    sealed: reuse it for another capture only after :meth:`unseal`.
    """

    def __init__(self, max_bytes: int | None = None) -> None:
        if max_bytes is not None and max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0 or None, got {max_bytes}")
        self.max_bytes = max_bytes
        self.sealed = False
        self.allocations = 0  # allocation nodes made in this pool, ever
        self.bytes = 0  # bytes of the ones still owned by the graph (not freed inside the capture)
        self._live: dict[int, int] = {}  # address -> size, allocated in the open capture

    def seal(self) -> None:
        """Refuse further allocations (CaptureError) until :meth:`unseal`."""
        self.sealed = True

    def unseal(self) -> None:
        self.sealed = False

    @property
    def outputs(self) -> int:
        """Buffers allocated in the capture and still alive at its end: the graph's outputs."""
        return len(self._live)

    def live_addresses(self) -> list[int]:
        return list(self._live)

    def take(self, nbytes: int) -> None:
        """Check that ``nbytes`` may be allocated now: CaptureError when sealed or over ``max_bytes``."""
        if self.sealed:
            raise CaptureError(
                f"the capture pool is sealed and cannot give {nbytes} bytes: this capture would allocate "
                "(an output without out=, an argmax, a split-K workspace or a gradient). Call pool.unseal() "
                "to let it allocate, or pass preallocated out= arrays"
            )
        if self.max_bytes is not None and self.bytes + nbytes > self.max_bytes:
            raise CaptureError(
                f"the capture pool holds {self.bytes} of its max_bytes={self.max_bytes} and cannot give "
                f"{nbytes} more: make it larger (CapturePool(max_bytes=...)) or pass out= arrays"
            )

    def booked(self, ptr: int, nbytes: int) -> None:
        self.allocations += 1
        self.bytes += nbytes
        self._live[ptr] = nbytes

    def released(self, ptr: int) -> bool:
        """Whether ``ptr`` was allocated in this capture (its free becomes part of the graph)."""
        nbytes = self._live.pop(ptr, None)
        if nbytes is None:
            return False
        self.bytes -= nbytes
        return True

    def __repr__(self) -> str:
        state = "sealed" if self.sealed else "open"
        return f"<lazykern CapturePool {state}, {self.allocations} allocations, {self.bytes} B held>"
