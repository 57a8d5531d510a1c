"""examples/fastapi_app.py under uvicorn, its event loop watched (see
loop_watch): GET /_stall answers the longest stall."""

from fastapi_app import app as fastapi_app
from loop_watch import watched

app = watched(fastapi_app)
