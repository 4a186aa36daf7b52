"""What a shell command line will run, as plain text that policy rules can match.

A line is parsed with tree-sitter-bash and turned into *units*. Each simple command the
shell would run is one unit, wherever it sits: in a list (``;``, ``&&``, ``||``), a
pipeline, a subshell, a ``{ }`` group, a function body, ``$(…)``/backticks (also inside
double quotes and ``${x:-…}``), ``<(…)``, the script of ``sh -c``/``bash -c``/``eval``/
``su -c``/``ssh host CMD``/``watch``, a heredoc or here-string fed to a shell, the
``echo``/``printf``/``cat <<EOF`` output piped into a shell, and ``find -exec``.

A command is rendered as its words, unquoted, joined by single spaces, after:

* wrappers are removed (``sudo``/``doas``/``env`` with their options, leading
  ``VAR=value``, ``nohup``, ``timeout DURATION``, ``nice``, ``command``, ``exec``,
  ``xargs``, ``time``, ``stdbuf``, ``ionice``, ``chroot DIR``, ``busybox``);
* the program is reduced to its base name (``/usr/bin/rm`` -> ``rm``);
* words that are only data are replaced by ``…``: the text of ``echo``/``printf``, a
  commit or tag message, a grep pattern, a prompt given to a coding agent, the script
  of ``sh -c`` (its commands are units of their own);
* a word containing whitespace is shown single-quoted; redirections follow as single
  tokens such as ``>/dev/sda``, ``2>&1``, ``<<EOF``, ``<<<…`` (heredoc bodies are
  never shown).

A unit has *views*: the command as above, then (if wrappers were removed) the whole
command with its wrappers (``sudo -u x rm -rf /``), so rules can see either. A pipeline
is one more unit whose view joins the views of its stages with `` | `` (so a rule can
see ``curl … | sh``). A function definition is a unit ``name() { body }``.

Lines made only of plain characters skip tree-sitter (see ``analysis.is_plain``); the
test suite checks that both paths give identical units wherever tree-sitter accepts
the line. When tree-sitter reports a syntax error, units are still built from what it
recovered, the raw text is added as extra units (whole, and cut at ``;``, ``&``,
``|``, parentheses and backticks with quotes dropped), and ``Analysis.error`` says
why, so the caller can apply its own policy.

The package: ``words`` normalises and masks the words of one command (no parser),
``quoting`` reads and writes shell quoting, ``tree`` loads tree-sitter and walks its
tree, and ``analysis`` ties them together into units. No dataclasses here: on the
hook's hot path ``import dataclasses`` costs about as much as the whole rest of this
package (it imports ``inspect``), so records are ``bar.slotted.Slotted`` classes.
"""

from bar.shell.analysis import Analysis, Unit, analyse_argv, analyse_line
from bar.shell.quoting import render
from bar.shell.words import PLACEHOLDER, SHELLS

__all__ = [
    "PLACEHOLDER",
    "SHELLS",
    "Analysis",
    "Unit",
    "analyse_argv",
    "analyse_line",
    "render",
]
