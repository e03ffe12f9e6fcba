"""The one exception type a user of heurlens is meant to read."""


class HeurlensError(Exception):
    """A mistake the user can fix; the message says what was wrong and what to do.

    The CLI prints it as one line (no traceback) and exits with status 2.
    """
