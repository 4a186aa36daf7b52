"""``bar mcp``, a face: the task's record and orders served to an agent over MCP."""
