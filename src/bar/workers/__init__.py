"""Steps run on other machines, through Temporal (docs/workers.md): the developer's side
and what a worker does to a task.

bar adds no scheduler of its own. A task sent to a queue (``bar run --on Q``, ``bar task
new --on Q``) is one Temporal workflow; each of its steps is one activity that a ``bar
worker`` on some machine takes (the face ``bar.worker``): it takes the task's history
through the git remote (docs/sharing.md) and runs the step under the same supervision as
here (``attempt``), publishes its progress while it runs (``published``) and pushes the
history back. The developer's bar (``client``) sends, follows and cancels steps, and
fetches the result; ``contract`` is what the two sides pass each other, ``temporal`` the
way to the server, ``devserver`` a server of one's own.

Nothing here is imported on the local path, and nothing here imports Temporal as it
loads: ``temporalio`` is an optional extra (``pip install bar[workers]``), loaded by
``temporal`` only when a command talks to a server.
"""
