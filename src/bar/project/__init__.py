"""A registered repository: init, its configuration, the registry of projects, doctor and its repairs."""
