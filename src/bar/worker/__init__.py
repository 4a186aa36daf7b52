"""``bar worker``, a face: this machine takes steps from a Temporal task queue
(docs/workers.md). The workflow of a task (``workflow``), the activity that runs one of
its steps (``activities``) and the worker process (``process``) ask everything of bar
through ``bar.api`` (``bar.api.attempts``), as ``bar``'s command line, its MCP server and
its web UI do; what they pass each other is ``bar.workers.contract``. Temporal's SDK,
the optional extra ``bar[workers]``, is loaded here and by ``bar.workers.temporal`` only.
"""
