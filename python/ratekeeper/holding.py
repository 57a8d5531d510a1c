"""`Limiter.ahold`'s answer: a coroutine of the Lease (awaited, or made a
task), and an async context manager that holds the lease for the block and
releases it at its end (see `Lease`)."""

from __future__ import annotations

from typing import Any, Coroutine, Generator


class AsyncHold:
    """A hold being taken: `await` it (or make it a task) for the Lease, or
    `async with` it. It is a coroutine (`asyncio.iscoroutine` says so): each
    step is the native coroutine's that takes the hold."""

    def __init__(self, pending: Coroutine[Any, Any, Any]) -> None:
        self._pending = pending
        self._lease: Any = None

    def __await__(self) -> Generator[Any, None, Any]:
        """This coroutine, stepped by `send`."""
        return self

    def __iter__(self) -> AsyncHold:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def send(self, value: Any) -> Any:
        """One step of the hold (its Lease, when done, as StopIteration's value)."""
        return self._pending.send(value)

    def throw(self, *error: Any) -> Any:
        """Raises `error` into the hold (a cancelled task's CancelledError)."""
        return self._pending.throw(*error)

    def close(self) -> None:
        """Closes the hold's coroutine (a call already made runs to its end)."""
        self._pending.close()

    async def __aenter__(self) -> Any:
        """The Lease, or RateLimitExceeded when the hold was refused."""
        self._lease = await self._pending
        return await self._lease.__aenter__()

    async def __aexit__(self, *exc: object) -> bool:
        """Releases the lease (an exception in the block goes on)."""
        await self._lease.__aexit__(*exc)
        return False
