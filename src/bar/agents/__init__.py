"""The coding agents bar supervises: their hook protocols (``protocol``) and their
settings files (``settings``). Nothing is imported here: ``bar hook`` needs only the
names below before it knows whether it must judge a command itself."""

AGENTS = ("claude", "codex", "gemini")
