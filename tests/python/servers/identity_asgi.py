"""A FastAPI app whose policies key logins by a body field (identity:email):
the ASGI middleware's on /login, the policy dependency's on /dep/login. Each
route answers with the length and digest of the body it received, to show
that the body reached it whole after the door read it."""

import hashlib
import os

from fastapi import Depends, FastAPI, Request

import ratekeeper.fastapi
from ratekeeper.asgi import RateLimitMiddleware


def login_policy(scope: str, path: str) -> dict:
    return {
        "store": {"url": os.environ["RATEKEEPER_STORE"], "prefix": os.environ["RATEKEEPER_PREFIX"]},
        "throttle": [{"scope": scope, "rules": "2/minute", "key": "identity:email", "paths": [path],
                      "methods": ["POST"]}],
    }


app = FastAPI()
app.add_middleware(RateLimitMiddleware, policy=login_policy("login-email", "/login"))
ratekeeper.fastapi.setup(app)


async def received(request: Request) -> dict:
    body = await request.body()
    return {"length": len(body), "sha256": hashlib.sha256(body).hexdigest()}


@app.get("/health")
async def health() -> dict:
    return {"ok": True}


@app.post("/login")
async def login(request: Request) -> dict:
    return await received(request)


@app.post("/dep/login", dependencies=[Depends(ratekeeper.fastapi.policy(login_policy("dep-login-email", "/dep/login")))])
async def dep_login(request: Request) -> dict:
    return await received(request)
