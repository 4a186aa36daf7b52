"""What a shell command line will run, as plain text that policy rules can match.

A line is parsed with tree-sitter-bash and turned into *units*. Each simple command the
shell would run is one unit, wherever it sits: in a list (``;``, ``&&``, ``||``), a
pipeline, a subshell, a ``{ }`` group, a function body, ``$(…)``/backticks (also inside
double quotes and ``${x:-…}``), ``<(…)``, the script of ``sh -c``/``bash -c``/``eval``/
``su -c``/``ssh host CMD``/``watch``, a heredoc or here-string fed to a shell, the
``echo``/``printf``/``cat <<EOF`` output piped into a shell (also through ``base64 -d``,
``xxd -r -p``, ``rev``), ``find -exec``, and the scripts of programs such as
``script -c``, ``tmux new``, ``screen -X stuff``, ``parallel``, ``at``, ``expect`` and of
git aliases and git settings that name a command (``programs``, ``options``).

A command is rendered as its words, unquoted, joined by single spaces, after:

* wrappers are removed (``sudo``/``doas``/``env`` with their options, leading
  ``VAR=value``, ``nohup``, ``setsid``, ``timeout DURATION``, ``nice``, ``command``,
  ``exec``, ``xargs``, ``flock FILE``, ``taskset MASK``, ``unshare``, ``strace``,
  ``systemd-run``, ``screen -dm``… (``wrappers``));
* the program is reduced to its base name (``/usr/bin/rm`` -> ``rm``);
* abbreviated long options are written out (``rm --rec`` -> ``rm --recursive``,
  ``options``);
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
with what ``wrappers``, ``options`` and ``programs`` know about particular programs;
``quoting`` reads and writes shell quoting, ``tree`` loads tree-sitter and walks its
tree (a ``$(echo …)`` whose output is known is shown as that output), and ``analysis``
ties them together into units. No dataclasses here: on the hook's hot path ``import
dataclasses`` costs about as much as the whole rest of this package (it imports
``inspect``), so records are ``bar.base.record`` records, which load nothing.
"""

from bar.shell.analysis import Analysis, Unit, analyse_argv, analyse_line, plain_program
from bar.shell.quoting import render
from bar.shell.words import PLACEHOLDER, SHELLS

__all__ = [
    "PLACEHOLDER",
    "SHELLS",
    "Analysis",
    "Unit",
    "analyse_argv",
    "analyse_line",
    "plain_program",
    "render",
]
