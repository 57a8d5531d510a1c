"""Celery tasks limited by ratekeeper, with the same rules, keys and Redis as
the web apps:

    from celery import Celery
    import ratekeeper
    from ratekeeper.celery import RateLimitedTask

    app = Celery("jobs", broker="redis://127.0.0.1:6379/1")
    partner = ratekeeper.Limiter("20/second; 10000/day", "redis://127.0.0.1:6379/0")

    @app.task(base=RateLimitedTask, limiter=partner, limit_key=lambda account: f"partner:{account}")
    def sync_account(account): ...

A task whose check is denied does not run now: the same task (name,
arguments, id) is sent again with ``countdown`` its ``retry_after`` (plus a
little jitter), and this run ends with ``celery.exceptions.Ignore``, so it
counts as neither a failure nor a retry. ``limiter`` is the limiter to check
(its rules; a per-task scope ``celery:<name>`` keeps the task's quota apart
unless ``limit_scope`` names another, say the web app's); ``limit_key`` a
callable of the task's arguments (default: the task's name). The admitting
decision is ``self.request.ratekeeper`` (a bound task's ``request``).

``limit_cost`` is what a run costs: an int or, for a limiter with meters,
units per meter (``{"requests": 1, "tokens": 2000}``), or a callable of the
task's arguments giving it (default 1). When a run's cost is known only
from its result (the tokens an LLM call used), ``limit_settle`` is a callable
of the result giving what it cost: ``limit_cost`` is then an estimate,
reserved before the run and settled after it (a run that raises keeps its
estimate):

    llm = ratekeeper.Limiter({"requests": "3500/minute", "tokens": "90000/minute"}, "redis://...")

    @app.task(base=RateLimitedTask, limiter=llm, limit_key=lambda prompt: "openai",
              limit_cost={"requests": 1, "tokens": 2000},
              limit_settle=lambda reply: {"tokens": reply["usage"]["total_tokens"]})
    def complete(prompt): ...

A limiter with an in-flight rule (``"5 concurrent; 100/minute"``) makes a
run hold a slot while it runs: the lease is released when the run ends
(raising or not), or lapses after the limiter's ``lease`` when the worker
died. As Sidekiq Enterprise's concurrent limiter does, a run waits for a
slot up to ``limit_wait_timeout`` seconds (default 5; 0: not at all), then
is sent again as a denied one is, after its ``retry_after`` but at most 1 s,
never failed.
"""

import random
from typing import Any, Callable, Optional

from celery import Task
from celery.exceptions import Ignore

from ratekeeper._ratekeeper import Limiter, scope_name


class RateLimitedTask(Task):  # type: ignore[misc]
    """A Celery task base that runs a task only within its limiter's rules."""

    abstract = True
    limiter: Optional[Limiter] = None
    limit_key: Optional[Callable[..., Any]] = None
    limit_scope: Optional[str] = None
    limit_cost: Any = None
    limit_settle: Optional[Callable[[Any], Any]] = None
    limit_wait_timeout: float = 5.0
    _scoped: Optional[Limiter] = None

    def _limiter(self) -> Limiter:
        if self.limiter is None:
            raise RuntimeError(f"task {self.name} has base=RateLimitedTask but no limiter=")
        if self._scoped is None:
            scope = self.limit_scope if self.limit_scope is not None else f"celery:{self.name}"
            limits = self.limiter.meters or self.limiter.rules
            if self.limiter.in_flight is not None:
                limits = [*self.limiter.rules, f"{self.limiter.in_flight} concurrent"]
            self._scoped = self.limiter.with_rules(limits, scope=scope_name(scope))
        return self._scoped

    def _option(self, name: str) -> Any:
        """A task option as given (a plain function, however Celery stored it)."""
        value = type(self).__dict__.get(name) or getattr(type(self), name, None)
        return getattr(value, "__func__", value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        key_of = self._option("limit_key")
        key = key_of(*args, **kwargs) if key_of else self.name
        cost = self._option("limit_cost")
        cost = cost(*args, **kwargs) if callable(cost) else cost
        settle = self._option("limit_settle")
        if self._limiter().in_flight is not None:
            timeout = self._option("limit_wait_timeout")
            lease = self._limiter().hold(key, cost, wait=timeout > 0, timeout=timeout)
            decision = lease.decision
            if decision.allowed:
                self.request.ratekeeper = decision
                with lease:
                    return super().__call__(*args, **kwargs)
        elif settle is None:
            decision = self._limiter().check(key, cost)
            if decision.allowed:
                self.request.ratekeeper = decision
                return super().__call__(*args, **kwargs)
        else:
            reservation = self._limiter().reserve(key, cost)
            decision = reservation.decision
            if decision.allowed:
                self.request.ratekeeper = decision
                result = super().__call__(*args, **kwargs)
                reservation.settle(settle(result))
                return result
        wait = decision.retry_after if decision.retry_after is not None else 1.0
        if decision.in_flight is not None:
            wait = min(wait, 1.0)  # a slot may be released at any moment
        wait += 0.001 + random.random() * min(wait / 10, 0.025)
        # the same task, as Task.retry sends it (queue, routing, headers kept), without counting a retry
        self.signature_from_request(self.request, args, kwargs, countdown=wait, task_id=self.request.id).apply_async()
        raise Ignore()
