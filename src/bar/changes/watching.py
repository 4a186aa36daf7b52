"""The watcher process's entry (``python -m bar.changes.watching FD``): the speed layer's
watcher (``bar.changes.fast.watcher_daemon``) given the record's staging of hand edits
(``bar.history.ahead.stage``), so that neither layer imports the other's way up."""

from __future__ import annotations

import sys

from bar.changes import fast
from bar.history import ahead

if __name__ == "__main__":
    sys.exit(fast.watcher_main(sys.argv, ahead.stage))
