"""What an agent said and did in a step, and what it cost (docs/sessions.md).

bar reads the agent's own transcript as the agent writes it (in its home for the task,
``bar.agents.homes``) and keeps a redacted, tool-neutral copy beside the step:
``artifacts/NNNN.session.jsonl``, one event per line (``bar.session.events``). One
reader per agent turns its format into those events (``claude``, ``codex``, ``gemini``);
``capture`` follows the files while the step runs (for budgets) and writes the copy when
it ends; ``stored`` reads it back for ``bar show --session``, ``bar log``, the UI and MCP.
"""
