"""FastAPI with ratekeeper: every request limited per client IP by the ASGI
middleware, and /search also by its own rule (a dependency). Run it with
`uvicorn --app-dir examples fastapi_app:app`; RATEKEEPER_STORE picks the
store (default: memory)."""

import os

from fastapi import Depends, FastAPI

import ratekeeper
import ratekeeper.fastapi
from ratekeeper.asgi import RateLimitMiddleware

limiter = ratekeeper.Limiter("10/second; 100/minute", os.environ.get("RATEKEEPER_STORE", "memory://"),
                             prefix=os.environ.get("RATEKEEPER_PREFIX", "demo"))
app = FastAPI()
app.add_middleware(RateLimitMiddleware, limiter=limiter, exempt=["/health"])
ratekeeper.fastapi.setup(app, limiter)


@app.get("/")
async def home() -> dict:
    return {"hello": "world"}


@app.get("/search", dependencies=[Depends(ratekeeper.fastapi.limit("2/second"))])
async def search(q: str = "") -> dict:
    return {"q": q}


@app.get("/health")
async def health() -> dict:
    return {"ok": True}
