"""What bar holds, written in the formats other tools of the field read (docs/sharing.md).

- ``atif``: a task's agent sessions as an ATIF trajectory (``bar export --format atif``);
- ``otel``: steps, agent sessions and tool calls as OpenTelemetry spans after the GenAI
  semantic conventions (``bar export --format otel``), and ``telemetry``, which hands
  each recorded step to a sender in the background when an OTLP endpoint is set;
- ``gitai``: line attribution as git notes in the git-ai authorship format
  (``bar notes export|import``).

Agent Trace records (``bar export --format agent-trace``) are ``bar.history.trace``.
Each reads the record and never changes it; what leaves is scrubbed of every secret the
process knows, as the record was when it was written.
"""
