"""bar's files under ``$BAR_HOME``: where they are (``layout``), how they are written so a
crash never leaves half a file (``files``), locked (``lock``) and cached (``cache``).

Empty on purpose: ``bar hook`` imports single modules of this package on its hot path.
"""
