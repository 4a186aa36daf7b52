"""The coding agents bar supervises: their hook protocols (``protocol``) and their
settings files (``settings``). Nothing else is imported here: ``bar hook`` needs only
the names before it knows whether it must judge a command itself."""

from bar.model.agent_names import AGENTS

__all__ = ["AGENTS"]
