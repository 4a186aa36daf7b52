"""Running one command as a step: the runner, its supervisor, hooks, orders and the channel to ``bar hook``."""
