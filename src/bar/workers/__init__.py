"""Steps run on other machines, through Temporal (docs/workers.md).

bar adds no scheduler of its own. A task sent to a queue (``bar run --on Q``, ``bar task
new --on Q``) is one Temporal workflow (``flow``); each of its steps is one activity
(``steps``) that a ``bar worker`` (``worker``) on some machine takes: it fetches the
task's history through the git remote (docs/sharing.md), runs the step under the same
supervision as here, publishes its progress while it runs (``progress``) and pushes the
history back. The developer's bar (``client``) streams the step's output and fetches
the result.

Nothing here is imported on the local path: ``temporalio`` is an optional extra
(``pip install bar[workers]``), loaded by ``temporal`` only when a command talks to a
server.
"""
