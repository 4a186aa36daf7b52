"""The aide formats: the person's decisions an agent asks for (``decide``) and where a task's work stands (``flow``)."""
