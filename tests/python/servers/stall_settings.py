"""The example project's settings, reading the shared policies every 0.1 s
(the shortest refresh), so a refresh falls due many times while Redis is frozen."""

from demo.settings import *  # noqa: F401,F403
from demo.settings import RATEKEEPER

RATEKEEPER = {**RATEKEEPER, "CONTROLS_REFRESH": 0.1, "RULES": "1000/second"}
