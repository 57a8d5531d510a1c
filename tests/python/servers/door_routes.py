"""The routes the door tests' FastAPI apps share: /health, which the tests
probe until a server answers, and /dependency, which answers what a FastAPI
dependency said of the app's policy (its refusal, or "" when it took it)."""

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

import ratekeeper
import ratekeeper.fastapi


def add_probes(app: FastAPI, policy) -> None:
    """Adds /health and /dependency to `app`, whose middleware has `policy`."""
    try:
        ratekeeper.fastapi.policy(policy)
        refused = ""
    except ratekeeper.ConfigurationError as exc:
        refused = str(exc)

    @app.get("/health")
    async def health() -> PlainTextResponse:
        return PlainTextResponse("ok")

    @app.get("/dependency")
    async def dependency() -> PlainTextResponse:
        return PlainTextResponse(refused)
