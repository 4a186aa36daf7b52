"""The names of the coding agents bar supervises, one module each in ``bar.agents``
(``bar.agents.base.of``): here, below every layer that names one (the ledger's filters,
the session readers), and loaded by ``bar hook`` at no cost."""

AGENTS = ("claude", "codex", "gemini")
