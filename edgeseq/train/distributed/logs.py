"""Keep a cluster's workers quiet about edgeseq's own, expected errors.

Why: a partition with a NaN, a shard that changed on disk, a label the model does not know: each
is an `EdgeseqError` raised inside a task, and the client re-raises it as the one line the user
sees. But before that, distributed's worker logs the failure itself, at ERROR, with the task, the
exception and its traceback (``Compute Failed ...``), so a one-line error arrived under a screen of
worker log. The filter installed here on every worker drops exactly that record when the task
raised an edgeseq error from edgeseq's own code; any other failure (a bug, ``MemoryError``, a user's
own exception) is logged by the worker as before, so genuine crashes stay visible.

This module imports ``distributed``: it is imported only when a fit runs on a cluster.
"""

from __future__ import annotations

import logging
import os
import re

from distributed.diagnostics.plugin import WorkerPlugin

import edgeseq
from edgeseq.errors import EdgeseqError

PLUGIN_NAME = "edgeseq-quiet-expected-errors"
_PACKAGE = os.path.dirname(os.path.abspath(edgeseq.__file__)) + os.sep
_LAST_FILE = re.compile(r'File "([^"]+)"')


def _edgeseq_error_names() -> set[str]:
    names, todo = set(), [EdgeseqError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names


def is_expected_failure(exception_text: str, traceback_text: str) -> bool:
    """True when a failed task raised an `EdgeseqError` (by its repr) from a frame inside edgeseq.

    Both texts are what distributed records of a failed task: ``repr(exception)`` and the formatted
    traceback. The last frame must be edgeseq's own file, so a user's exception that happens to share
    a class name is not taken for edgeseq's.

    Examples
    --------
    >>> import edgeseq.train.distributed.stats as ds
    >>> from edgeseq.train.distributed.logs import is_expected_failure
    >>> tb = f'  File "{ds.__file__}", line 212, in _report_non_finite\\n    raise InputError(...)\\n'
    >>> is_expected_failure("InputError('partition 3: X contains NaN')", tb)
    True
    >>> is_expected_failure("ValueError('a bug')", tb), is_expected_failure("InputError('x')", '  File "mine.py"')
    (False, False)
    """
    name = str(exception_text).split("(", 1)[0]
    files = _LAST_FILE.findall(str(traceback_text))
    return name in _edgeseq_error_names() and bool(files) and os.path.abspath(files[-1]).startswith(_PACKAGE)


class ExpectedErrorFilter(logging.Filter):
    """Drops distributed's "Compute Failed" record of a task that raised an expected edgeseq error.

    Examples
    --------
    >>> import logging
    >>> import edgeseq.train.distributed.stats as ds
    >>> from edgeseq.train.distributed.logs import ExpectedErrorFilter
    >>> tb = f'  File "{ds.__file__}", line 212, in _report_non_finite\\n'
    >>> def record(exc):
    ...     return logging.LogRecord("distributed.worker", logging.ERROR, "", 0, "Compute Failed\\nKey: %s\\n"
    ...                              "State: %s\\nTask: %s\\nException: %r\\nTraceback: %r\\n",
    ...                              ("k", "executing", "t", exc, tb), None)
    >>> f = ExpectedErrorFilter()
    >>> f.filter(record("InputError('partition 3: X contains NaN')")), f.filter(record("ZeroDivisionError()"))
    (False, True)
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """False (drop) for the "Compute Failed" record of an expected edgeseq error; True otherwise.

        Examples
        --------
        >>> import logging
        >>> from edgeseq.train.distributed.logs import ExpectedErrorFilter
        >>> ExpectedErrorFilter().filter(logging.LogRecord("x", logging.INFO, "", 0, "worker started", (), None))
        True
        """
        args = record.args if isinstance(record.args, tuple) else ()
        if not str(record.msg).startswith("Compute Failed") or len(args) < 5:
            return True
        return not is_expected_failure(args[3], args[4])


class QuietExpectedErrors(WorkerPlugin):
    """Installs `ExpectedErrorFilter` on a worker's ``distributed.worker`` logger (once per worker).

    Examples
    --------
    >>> import logging
    >>> from edgeseq.train.distributed.logs import ExpectedErrorFilter, QuietExpectedErrors
    >>> QuietExpectedErrors().setup(worker=None)
    >>> QuietExpectedErrors().setup(worker=None)          # idempotent
    >>> sum(isinstance(f, ExpectedErrorFilter) for f in logging.getLogger("distributed.worker").filters)
    1
    """

    def setup(self, worker) -> None:
        """Add the filter unless this process's worker logger already has one.

        Examples
        --------
        >>> from edgeseq.train.distributed.logs import QuietExpectedErrors
        >>> QuietExpectedErrors().setup(worker=None) is None
        True
        """
        log = logging.getLogger("distributed.worker")
        if not any(isinstance(f, ExpectedErrorFilter) for f in log.filters):
            log.addFilter(ExpectedErrorFilter())


def quiet_expected_errors(client) -> None:
    """Register `QuietExpectedErrors` on `client`'s cluster: every current and future worker gets it.

    Registering again under the same name replaces the plugin, so each fit may call this.

    Examples
    --------
    >>> from edgeseq.train.distributed.logs import quiet_expected_errors
    >>> class Client:  # stands in for distributed.Client
    ...     def register_plugin(self, plugin, name=None):
    ...         print(type(plugin).__name__, name)
    >>> quiet_expected_errors(Client())
    QuietExpectedErrors edgeseq-quiet-expected-errors
    """
    client.register_plugin(QuietExpectedErrors(), name=PLUGIN_NAME)


__all__ = ["ExpectedErrorFilter", "QuietExpectedErrors", "is_expected_failure", "quiet_expected_errors"]
