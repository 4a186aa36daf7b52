"""``bar mcp [--task ID|NAME]``: serve the task to an agent over MCP (stdio).

stdout is the protocol's: nothing else may be printed there once the server runs. An
error before it starts (no such task) is printed to stderr as usual.
"""

from __future__ import annotations

from bar import api
from bar.mcp.tools import OwnTask, serving


def mcp(*, task: str | None) -> int:
    loc = api.open_project()
    own = OwnTask(loc, serving(loc, task))
    from bar.mcp.server import serve  # the SDK, only now

    serve(own)
    return 0
