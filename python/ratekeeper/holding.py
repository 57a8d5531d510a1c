"""`Limiter.ahold`'s answer: awaited, the Lease; as `async with`, the lease
held for the block and released at its end (see `Lease`)."""

from __future__ import annotations

from typing import Any, Awaitable, Generator


class AsyncHold:
    """A hold being taken: `await` it for the Lease, or `async with` it."""

    def __init__(self, pending: Awaitable[Any]) -> None:
        self._pending = pending
        self._lease: Any = None

    def __await__(self) -> Generator[Any, None, Any]:
        """The Lease, once the hold is answered."""
        return self._pending.__await__()

    async def __aenter__(self) -> Any:
        """The Lease, or RateLimitExceeded when the hold was refused."""
        self._lease = await self._pending
        return await self._lease.__aenter__()

    async def __aexit__(self, *exc: object) -> bool:
        """Releases the lease (an exception in the block goes on)."""
        await self._lease.__aexit__(*exc)
        return False
