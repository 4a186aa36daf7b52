"""The command line's verbs, one module per verb: parse (``bar.cli.parser``) -> a typed call
of ``bar.api`` -> render. No git, no locks and no file writes here."""
