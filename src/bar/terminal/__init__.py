"""What a step's command prints: run it, show it live and record it.

``pipes`` runs a command with its stdout and stderr on pipes, ``pty`` runs an interactive
one in a pseudo-terminal; both pass what they record through a ``filters.StreamFilter``
(the secret scrubber). ``text`` turns a terminal byte stream into the plain text a reader
saw, ``cast`` writes, reads and replays the asciinema v2 recordings of pty steps, and
``textref`` keeps a pty step's text in its output file, which its recording refers to.

Empty on purpose: importing one of these modules must not pull in the others.
"""
