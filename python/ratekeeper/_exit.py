"""The record of denials written as a process exits: the periodic write
(every ``controls_refresh``) would lose a script's, a job's or a recycled
worker's last denials. They are written (once, one ``timeout`` at most) at
interpreter exit (``atexit``: a script, ``ratekeeper check``, a gunicorn
worker), and at the end of a child that ``multiprocessing`` or Celery's
prefork pool started (``billiard`` shares ``multiprocessing.util``'s
registries), which leaves by ``os._exit`` without ``atexit``.
"""

import atexit
import multiprocessing.util

from ratekeeper._ratekeeper import _flush_denials_at_exit


class _Children:
    """What the after-fork registry holds (weakly) for the process's life."""

    def started(self) -> None:
        """In a new child, whose finalizers were cleared: write its denials at its end."""
        multiprocessing.util.Finalize(None, _flush_denials_at_exit, exitpriority=100)


atexit.register(_flush_denials_at_exit)
_CHILDREN = _Children()
multiprocessing.util.register_after_fork(_CHILDREN, _Children.started)
