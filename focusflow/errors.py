"""The one marker of focusflow's own errors: what a user gave is wrong, and the message says how to fix it.

Every error class the package raises on purpose inherits ``FocusflowError`` (besides the builtin it
has always been, so existing ``except ValueError`` callers still catch it). The command line prints
such an error as one line and exits 2; anything else is a bug and keeps its traceback. This module
imports nothing, so every layer can use it.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator


class FocusflowError(Exception):
    """A problem with the input, the configuration or the environment that the message explains."""


class InputError(FocusflowError, ValueError):
    """An input (file, folder, model, option value) cannot be used as given; the message names it and the fix."""


class UnavailableError(FocusflowError, RuntimeError):
    """Something the run needs cannot be reached (an offline hub, a missing download); the message says what to pass."""


class TrainingDivergedError(FocusflowError, FloatingPointError):
    """A training run's loss or weights stopped being finite numbers (a learning rate too high, an fp16
    overflow): the run stops at that step and nothing of it is committed."""


#: OSError numbers of a full disk (or quota, or file size limit).
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
#: OSError numbers no retry changes: a full disk, a read-only file system, a refused permission, a path that runs
#: through a file (or names a folder where a file belongs).
PERMANENT_ERRNOS = DISK_FULL_ERRNOS | {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EISDIR}


#: A path the user named that is not there or not what it must be: their input, like a FocusflowError.
USER_PATH_ERRORS: tuple[type[OSError], ...] = (FileNotFoundError, NotADirectoryError, IsADirectoryError)


def is_user_error(error: BaseException) -> bool:
    """Whether ``error`` is a problem of what the user gave (focusflow's own errors, a path that is missing or of the
    wrong kind): the command line says it in one ``error:`` line, and no retry is made (:func:`is_permanent`)."""
    return isinstance(error, (FocusflowError, *USER_PATH_ERRORS))


def is_permanent(error: BaseException) -> bool:
    """Whether a retry can only repeat ``error``: the user's (:func:`is_user_error`: a mistyped ``corpus.paths`` is
    not retried twice), or an OSError of :data:`PERMANENT_ERRNOS` behind it. The one rule of the store's transport
    retries and of a stage task's retries."""
    if is_user_error(error):
        return True
    return any(isinstance(e, OSError) and e.errno in PERMANENT_ERRNOS for e in cause_chain(error))


__all__ = ["DISK_FULL_ERRNOS", "PERMANENT_ERRNOS", "USER_PATH_ERRORS", "FocusflowError", "InputError",
           "TrainingDivergedError", "UnavailableError", "is_permanent", "is_user_error"]


def cause_chain(error: BaseException | None) -> Iterator[BaseException]:
    """``error`` and what it was raised from or during (``__cause__``, else ``__context__``), each once."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__
