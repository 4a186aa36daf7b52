"""The speed layer: shortcuts that give the same answer as the slow truth, all off with ``BAR_FAST=0`` (``speed``)."""
