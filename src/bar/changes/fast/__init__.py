"""The speed layer: shortcuts that give the same answer as the slow truth, all off with
``BAR_FAST=0`` (``bar.base.speed``).

It is a guest of the record. The rest of bar reaches it only through the names of this
door, each a moment at which the record asks it something or tells it something, and
never imports its modules (the architecture test holds every other package to that;
``bar.cli.entry``, which runs before anything else is loaded, asks the resident's client
directly). A name is loaded with its module the first time it is asked for, so the door
costs nothing to pass: ``bar hook`` and a served command load none of what they do not
use. What each name does is said where it is defined.
"""

TYPE_CHECKING = False  # (not typing's: this module is loaded before the resident serves)
if TYPE_CHECKING:
    from bar.changes.fast.prescan import begin as prescan_begin
    from bar.changes.fast.prescan import discard as prescan_discard
    from bar.changes.fast.prescan import location as prescan_location
    from bar.changes.fast.prescan import start as prescan_start
    from bar.changes.fast.rescan import changed_since as changed_since
    from bar.changes.fast.rescan import scan as scan
    from bar.changes.fast.resident import QUIET as QUIET
    from bar.changes.fast.resident import SERVED as SERVED
    from bar.changes.fast.resident import idle_seconds as resident_idle_seconds
    from bar.changes.fast.resident import ready as resident_ready
    from bar.changes.fast.resident import shared_refusal as resident_shared_refusal
    from bar.changes.fast.resident import socket_path as resident_socket
    from bar.changes.fast.resident import start as start_resident
    from bar.changes.fast.resident import status as resident_status
    from bar.changes.fast.resident import stop as stop_resident
    from bar.changes.fast.resident_daemon import main as resident_main
    from bar.changes.fast.restored import after as restore_after
    from bar.changes.fast.restored import before as restore_before
    from bar.changes.fast.restored import forget_written as forget_written
    from bar.changes.fast.restored import moves_gitlinks as moves_gitlinks
    from bar.changes.fast.staging import MAX_BYTES as STAGED_MAX_BYTES
    from bar.changes.fast.staging import PATCH as STAGED_PATCH
    from bar.changes.fast.staging import adopt as adopt_staged
    from bar.changes.fast.staging import discard as discard_staged
    from bar.changes.fast.staging import take_patch as take_patch
    from bar.changes.fast.stamps import flush as flush
    from bar.changes.fast.stamps import forget as forget
    from bar.changes.fast.stamps import holds_no_gitlink as holds_no_gitlink
    from bar.changes.fast.stamps import nested_repositories as nested_repositories
    from bar.changes.fast.stamps import recommit as recommit
    from bar.changes.fast.stamps import restamp as restamp
    from bar.changes.fast.stamps import settled_ctimes as settled_ctimes
    from bar.changes.fast.stamps import shape_of as shape_of
    from bar.changes.fast.stamps import stamp as stamp
    from bar.changes.fast.stamps import stamped_attributes as stamped_attributes
    from bar.changes.fast.stamps import stamped_dirs as stamped_dirs
    from bar.changes.fast.stamps import stamps_path as stamps_file
    from bar.changes.fast.stamps import tree_of as tree_of
    from bar.changes.fast.watcher import TIMEOUT as WATCHER_TIMEOUT
    from bar.changes.fast.watcher import claim_for as claim_for
    from bar.changes.fast.watcher import keep_watching as keep_watching
    from bar.changes.fast.watcher import look as look
    from bar.changes.fast.watcher import mode as watch_mode
    from bar.changes.fast.watcher import rebase as rebase
    from bar.changes.fast.watcher import running as watching
    from bar.changes.fast.watcher import settle as settle
    from bar.changes.fast.watcher import stop as stop_watching
    from bar.changes.fast.watcher_daemon import main as watcher_main
    from bar.changes.fast.watches import Claim as Claim

# name -> (its module here, its name there), by the moment the record meets it
DOOR = {
    # before a look: what may have changed since the last one (``rescan``), and the
    # early look begun while a command's code loads (``prescan``)
    "scan": ("rescan", "scan"),
    "changed_since": ("rescan", "changed_since"),
    "stamped_dirs": ("stamps", "stamped_dirs"),
    "holds_no_gitlink": ("stamps", "holds_no_gitlink"),
    "prescan_begin": ("prescan", "begin"),
    "prescan_start": ("prescan", "start"),
    "prescan_discard": ("prescan", "discard"),
    "prescan_location": ("prescan", "location"),
    # after a look: what it saw, noted for the next (``stamps``)
    "stamp": ("stamps", "stamp"),
    "recommit": ("stamps", "recommit"),
    "flush": ("stamps", "flush"),
    "forget": ("stamps", "forget"),
    "stamps_file": ("stamps", "stamps_path"),
    "tree_of": ("stamps", "tree_of"),
    "stamped_attributes": ("stamps", "stamped_attributes"),
    "shape_of": ("stamps", "shape_of"),
    "nested_repositories": ("stamps", "nested_repositories"),
    # a restore: the directories it wrote, stamped with the times it gave them
    # (``restored``, ``stamps``)
    "restore_before": ("restored", "before"),
    "restore_after": ("restored", "after"),
    "forget_written": ("restored", "forget_written"),
    "moves_gitlinks": ("restored", "moves_gitlinks"),
    "settled_ctimes": ("stamps", "settled_ctimes"),
    "restamp": ("stamps", "restamp"),
    # the task's watcher, between commands (``watcher``, ``watches``, ``watcher_daemon``)
    "watching": ("watcher", "running"),
    "look": ("watcher", "look"),
    "settle": ("watcher", "settle"),
    "rebase": ("watcher", "rebase"),
    "stop_watching": ("watcher", "stop"),
    "watch_mode": ("watcher", "mode"),
    "claim_for": ("watcher", "claim_for"),
    "keep_watching": ("watcher", "keep_watching"),
    "WATCHER_TIMEOUT": ("watcher", "TIMEOUT"),
    "Claim": ("watches", "Claim"),
    "watcher_main": ("watcher_daemon", "main"),
    # hand edits the watcher staged ahead (``staging``)
    "adopt_staged": ("staging", "adopt"),
    "take_patch": ("staging", "take_patch"),
    "discard_staged": ("staging", "discard"),
    "STAGED_MAX_BYTES": ("staging", "MAX_BYTES"),
    "STAGED_PATCH": ("staging", "PATCH"),
    # a warm bar, forked for each command (``resident``, ``resident_daemon``)
    "SERVED": ("resident", "SERVED"),
    "QUIET": ("resident", "QUIET"),
    "resident_status": ("resident", "status"),
    "resident_socket": ("resident", "socket_path"),
    "resident_ready": ("resident", "ready"),
    "resident_shared_refusal": ("resident", "shared_refusal"),
    "resident_idle_seconds": ("resident", "idle_seconds"),
    "start_resident": ("resident", "start"),
    "stop_resident": ("resident", "stop"),
    "resident_main": ("resident_daemon", "main"),
}


# the door's names (those of ``DOOR``)
__all__ = [
    "QUIET",
    "SERVED",
    "STAGED_MAX_BYTES",
    "STAGED_PATCH",
    "WATCHER_TIMEOUT",
    "Claim",
    "adopt_staged",
    "changed_since",
    "claim_for",
    "discard_staged",
    "flush",
    "forget",
    "forget_written",
    "holds_no_gitlink",
    "keep_watching",
    "look",
    "moves_gitlinks",
    "nested_repositories",
    "prescan_begin",
    "prescan_discard",
    "prescan_location",
    "prescan_start",
    "rebase",
    "recommit",
    "resident_idle_seconds",
    "resident_main",
    "resident_ready",
    "resident_shared_refusal",
    "resident_socket",
    "resident_status",
    "restamp",
    "restore_after",
    "restore_before",
    "scan",
    "settle",
    "settled_ctimes",
    "shape_of",
    "stamp",
    "stamped_attributes",
    "stamped_dirs",
    "stamps_file",
    "start_resident",
    "stop_resident",
    "stop_watching",
    "take_patch",
    "tree_of",
    "watch_mode",
    "watcher_main",
    "watching",
]


def __getattr__(name):  # type: ignore[no-untyped-def]  # (typed by the imports above)
    """The door's ``name``, from its module, loaded now if it was not. Looked up each time,
    not kept here, so that what replaces a name in its module (a test's patch) is what
    the record meets."""
    import sys

    found = DOOR.get(name)
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = f"{__name__}.{found[0]}"
    if module not in sys.modules:
        __import__(module)
    return getattr(sys.modules[module], found[1])
