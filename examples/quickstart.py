"""The quick start: three requests a second, five a minute, on the embedded store.

    python examples/quickstart.py
"""

import ratekeeper

limiter = ratekeeper.Limiter("3/second; 5/minute")  # store="redis://127.0.0.1:6379/0" in production

for i in range(1, 8):
    d = limiter.check("user:42")
    print(f"request {i}: allowed={d.allowed} remaining={d.remaining}/{d.limit} retry_after={d.retry_after}")

print("headers of the last answer:", limiter.check("user:42").headers())
print("another user is not affected:", limiter.check("user:43"))
