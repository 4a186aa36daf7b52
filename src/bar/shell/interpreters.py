"""What an interpreter's one-liner does to files and what it runs: ``python3 -c``,
``perl -e``, ``ruby -e``, ``node -e``, ``php -r``.

The code is not executed nor fully parsed; it is read for the calls that matter to a
policy, in the forms one-liners use, whatever the language:

* a shell command it runs (``os.system('…')``, ``subprocess.run('…', shell=True)``,
  ``system("…")``, ``execSync('…')``, backticks, ``qx{…}``) is a script, analysed as a
  line of its own; a command given as a list of words (``subprocess.run(['rm', '-rf',
  p])``, ``system("rm", "-rf", p)``, ``spawnSync('rm', ['-rf', p])``) is a command;
* a library call that deletes a tree (``shutil.rmtree``, ``File::Path``'s ``rmtree`` /
  ``remove_tree``, ``FileUtils.rm_rf``, ``fs.rmSync``…) is the command ``rm -rf PATH``,
  one that deletes a file (``os.remove``, ``unlink``…) is ``rm PATH``, one that opens a
  file for writing or empties it (``open(p, 'w')``, ``write_text``, ``writeFileSync``,
  ``truncate``) is ``truncate -s 0 PATH``: the rules about those commands then hold for
  every language alike;
* a path is read from the expression that makes it where it can be: string literals,
  the home directory however it is asked for (``os.path.expanduser('~')``,
  ``Path.home()``, ``$ENV{HOME}``, ``Dir.home``, ``os.homedir()``) as ``~``, the working
  directory as ``.``, ``dirname(X)`` as ``X/..``, and joins and concatenations of those.
  A path made of anything else is unknown and makes no command.
"""

from __future__ import annotations

import re

# program -> the options whose value is the code (a combined short option such as
# ``-Ic`` or ``-le`` ends with the letter)
_CODE_OPTIONS = {
    "lua": "e",
    "awk": "",  # its program is its first operand (or the value of -e / --source)
    "python": "c",
    "perl": "eE",
    "ruby": "e",
    "node": "ep",
    "php": "r",
}
_LONG_CODE = ("--eval", "--print")
_PYTHON = re.compile(r"(?:python|pypy)[0-9.]*")


def language(prog: str) -> str | None:
    """The interpreter ``prog`` is, as a key of ``_CODE_OPTIONS``; None if none."""
    if _PYTHON.fullmatch(prog):
        return "python"
    if prog in ("nodejs", "bun", "deno"):
        return "node"
    if prog in ("awk", "gawk", "mawk", "nawk", "busybox-awk"):
        return "awk"
    if re.fullmatch(r"lua(?:jit|[0-9.]*)", prog):
        return "lua"
    if prog in ("perl", "ruby", "node", "php") or re.fullmatch(r"perl5[0-9.]*|php[0-9.]*", prog):
        return prog.rstrip("0123456789.") or prog
    return None


def code_of(lang: str, args: list[str]) -> str | None:
    """The one-liner given to the interpreter, if it was given one."""
    letters = _CODE_OPTIONS[lang]
    if lang == "node" and args[:1] == ["eval"]:  # deno eval CODE
        return args[1] if len(args) > 1 else None
    if lang == "awk":
        return _awk_program(args)
    for k, arg in enumerate(args):
        if arg == "--" or (not arg.startswith("-") and lang != "perl"):
            return None  # a script file: its code is not on the line
        if arg in _LONG_CODE and lang == "node":
            return args[k + 1] if k + 1 < len(args) else None
        if arg.startswith("--eval=") and lang == "node":
            return arg.partition("=")[2]
        if len(arg) > 1 and arg[0] == "-" and arg[1] != "-" and arg[-1] in letters:
            if lang == "perl" and arg[1] in "MImx":  # -MFile::Path: a module, not -e
                continue
            return args[k + 1] if k + 1 < len(args) else None
        if lang == "perl" and not arg.startswith("-"):
            return None
    return None


_STRING = r"""(?:[rRbBuUfF]{0,2}"(?:[^"\\]|\\.)*"|[rRbBuUfF]{0,2}'(?:[^'\\]|\\.)*')"""
_RUNS_SHELL = re.compile(
    r"(?<!\w)(?:os\.|Kernel\.|subprocess\.|child_process\.|cp\.|IO\.|Open3\.)?"
    r"(?:system|popen|popen2|popen3|capture2e?|capture3|getoutput|getstatusoutput|"
    r"run|call|check_call|check_output|Popen|exec|execSync|spawn|spawnSync|execFile|"
    r"execFileSync|shell_exec|passthru|proc_open|execute|"
    r"execvpe?|execve|execlp?e?|spawnv[pe]*|spawnl[pe]*|posix_spawnp?)(?!\w)\s*\(?\s*"
)
_BACKTICKS = re.compile(r"`([^`]{1,4096})`|\bqx\s*([{(\[<|/!])|%x\s*([{(\[<|/!])")
_CLOSING = {"{": "}", "(": ")", "[": "]", "<": ">"}
_TREE_DELETES = re.compile(
    r"(?<![\w])(?:\w+\.)*(?:rmtree|remove_tree|rm_rf|rm_r|remove_dir|remove_entry_secure|"
    r"remove_entry|rmSync|rmdirSync|rmdir|rimraf|removedirs|rm|delete_tree)(?!\w)\s*\(?\s*"
)
_FILE_DELETES = re.compile(
    r"(?<![\w])(?:\w+\.)*(?:remove|unlink|unlinkSync|delete|safe_unlink)(?!\w)\s*\(?\s*"
)
_WRITES = re.compile(
    r"(?<!\w)(?:(?:File|IO)\.write|(?:\w+\.)*(?:open|write_text|write_bytes|writeFileSync|"
    r"writeFile|truncate|truncateSync|file_put_contents))(?!\w)\s*\(?\s*"
)
_WRITE_MODE = re.compile(r"""(?:mode\s*=\s*)?[rRbB]?["'][rb]?[wx]""")

# expressions that name the home directory, the working directory, its parent
_HOME = re.compile(
    r"""(?:os\.environ|ENV)\.HOME|(?:os\.path\.expanduser|expanduser)\(\s*["']~["']\s*\)"""
    r"""|(?:pathlib\.)?Path\.home\(\)|(?:require\(\s*["']os["']\s*\)|os)\.homedir\(\)"""
    r"""|Dir\.home|File\.expand_path\(\s*["']~["']\s*\)"""
    r"""|(?:os\.environ|ENV)\s*\[\s*["']HOME["']\s*\]|\$ENV\{\s*["']?HOME["']?\s*\}"""
    r"""|(?:os\.environ\.get|os\.getenv|getenv|ENV\.fetch)\(\s*["']HOME["']\s*\)"""
    r"""|ENVIRON\[\s*["']HOME["']\s*\]|process\.env\.HOME|\$_SERVER\[\s*["']HOME["']\s*\]"""
    r"""|Deno\.env\.get\(\s*["']HOME["']\s*\)"""
)
# ... and inside a string (interpolated): "$ENV{HOME}/x", `${os.homedir()}/x`, "#{Dir.home}"
_HOME_INSIDE = re.compile(
    r"\$ENV\{\s*HOME\s*\}|\$\{HOME\}|\$HOME\b|#\{\s*(?:Dir\.home|ENV\[[\"']HOME[\"']\])\s*\}"
    r"|\$\{\s*(?:(?:require\([\"']os[\"']\)|os)\.homedir\(\)|process\.env\.HOME)\s*\}"
    r"|\{\s*(?:Path\.home\(\)|os\.environ\[[\"']HOME[\"']\])\s*\}"
)
_STRING_OR_HOME = re.compile(f"({_STRING})|{_HOME.pattern}")
_IMPORTED = re.compile(r"""(?:__import__|require)\(\s*["'](?:node:)?(\w+)["']\s*\)""")
# the user's name, however it is asked for: a path made with it is /home/$USER
_USER = re.compile(
    r"""getpass\.getuser\(\)|os\.getlogin\(\)|(?:os\.environ|ENV)\s*\[\s*["'](?:USER|LOGNAME)["']\s*\]"""
    r"""|\$ENV\{\s*["']?USER["']?\s*\}|(?:os\.getenv|getenv)\(\s*["']USER["']\s*\)"""
    r"""|os\.userInfo\(\)\.username|process\.env\.USER|Etc\.getlogin"""
)
_CWD = re.compile(
    r"os\.getcwd\(\)|(?:pathlib\.)?Path\.cwd\(\)|process\.cwd\(\)|Dir\.pwd|getcwd\(\)"
)
_PARENT = re.compile(r"os\.pardir")


def runs(lang: str, code: str, depth: int = 0) -> tuple[list[str], list[list[str]]]:
    """The scripts (shell lines) and the commands (words) the one-liner amounts to."""
    scripts: list[str] = []
    commands: list[list[str]] = []
    code = _plain(code)
    for payload in _decoded(code):  # exec(b64decode("…")), exec("…")
        more_scripts, more_commands = runs(lang, payload, depth + 1) if depth < 4 else ([], [])
        scripts += [*more_scripts, payload]
        commands += more_commands
    if lang == "node":  # a template literal is a string (with ${…} in it), not a command
        code = re.sub(r"`([^`\\]*)`", lambda m: '"' + m.group(1).replace('"', "'") + '"', code)
    _shell_calls(code, scripts, commands)
    _deletes(code, commands)
    _writes(lang, code, commands)
    scripts += _shell_strings(code)
    commands += _deleted_anyhow(code, commands)
    return scripts, commands


def _shell_calls(code: str, scripts: list[str], commands: list[list[str]]) -> None:
    """Commands run through a call (``system("…")``, ``run([…])``) or backticks."""
    for m in _RUNS_SHELL.finditer(code):
        args = _arguments(code, m.end())
        if not args:
            continue
        first = _path(args[0])  # a string, or one made of strings and the home directory
        listed = _words(args[0])
        if listed:
            commands.append(listed)
        elif first is not None and len(args) > 1 and (_words(args[1]) or _path(args[1])):
            rest = _words(args[1]) or [w if w is not None else "?" for w in map(_path, args[1:])]
            commands.append([first, *rest])
        elif first is not None:
            scripts.append(first)
    for m in _BACKTICKS.finditer(code):
        if m.group(1) is not None:
            scripts.append(m.group(1))
        else:
            opening = m.group(2) or m.group(3)
            closing = _CLOSING.get(opening, opening)
            end = code.find(closing, m.end())
            if end > m.end():
                scripts.append(code[m.end() : end])


def _deletes(code: str, commands: list[list[str]]) -> None:
    """Library calls that delete a tree (``rm -rf PATH``) or files (``rm PATH``)."""
    for pattern, make in ((_TREE_DELETES, ["rm", "-rf"]), (_FILE_DELETES, ["rm"])):
        for m in pattern.finditer(code):
            args = _arguments(code, m.end())
            name = m.group(0).rstrip("( \t").rsplit(".", 1)[-1]
            at = m.start() + m.group(0).rindex(name)
            if code[m.end() : m.end() + 1] == ")" and code[at - 1 : at] == ".":
                args = [_receiver(code, at) or ""]  # a method of the path: p.unlink()
            recursive = any(re.search(r"recursive\W+(?:true|True|1)", a) for a in args[1:])
            for arg in args[:1] if pattern is _TREE_DELETES or recursive else args:
                path = _path(arg)
                if path is not None:
                    commands.append([*(["rm", "-rf"] if recursive else make), path])


def _writes(lang: str, code: str, commands: list[list[str]]) -> None:
    """Library calls that empty a file or open it for writing (``truncate -s 0 PATH``)."""
    for m in _WRITES.finditer(code):
        args = _arguments(code, m.end())
        name = m.group(0).rstrip("( \t").rsplit(".", 1)[-1]
        target: str | None = args[0] if args else None
        if name in _METHOD_WRITES:
            target = _receiver(code, m.start() + m.group(0).index(name))
        if name == "open" and lang == "perl":
            target = _perl_written(args)
        elif name == "open" and not (len(args) > 1 and _WRITE_MODE.match(args[1])):
            continue
        if target is None:
            continue
        path = _path(target)
        if path is not None:
            commands.append(["truncate", "-s", "0", path])


_METHOD_WRITES = frozenset({"write_text", "write_bytes"})


def _receiver(code: str, dot: int) -> str | None:
    """The expression a method is called on (``(Path.home() / 'x').write_text``): the
    text before the ``.`` at ``dot - 1``, back to where it starts."""
    k = dot - 1
    if k < 0 or code[k] != ".":
        return None
    end, depth, k = k, 0, k - 1
    while k >= 0:
        ch = code[k]
        if ch == ")":
            depth += 1
        elif ch == "(":
            if not depth:
                break
            depth -= 1
        elif not depth and not (ch.isalnum() or ch in "_."):
            break
        k -= 1
    expr = code[k + 1 : end].strip()
    while expr.startswith("(") and expr.endswith(")"):
        expr = expr[1:-1].strip()
    return expr or None


_FOLD = re.compile(rf"({_STRING})\s*(?:\+|\.\.?|,(?=\s*\.\.\.))?\s*({_STRING})")
_GETATTR = re.compile(r"""getattr\(\s*([\w.]+)\s*,\s*["'](\w+)["']\s*\)""")
_INDEXED = re.compile(r"""\[\s*["']([A-Za-z_]\w*)["']\s*\](?=\s*\()""")  # f["rmSync"](…)
_ENCODED = re.compile(
    r"""(?:b64decode|decodebytes|atob|decode_base64|base64_decode|unpack1?\(\s*["']m0?["']\s*,?)"""
    r"""\(?\s*[bB]?["']([A-Za-z0-9+/=\s]{8,})["']"""
    r"""|Buffer\.from\(\s*["']([A-Za-z0-9+/=]{8,})["']\s*,\s*["']base64["']"""
)
_EVALUATED = re.compile(
    rf"(?<![\w.])(?:exec|eval|compile|loadstring|load|Function)\(\s*({_STRING})"
)
# the code runs something through a shell, or deletes something
_EXECUTES = re.compile(
    r"(?<!\w)(?:system|popen|exec\w*|spawn\w*|execute|shell_exec|passthru|run|call|Popen|"
    r"check_output|getoutput|qx|Command)\s*[({]|`|%x[({\[]"
)
_DELETES = re.compile(
    r"(?<!\w)(?:rmtree|remove_tree|rm_rf|rm_r|rmSync|rmdirSync|rimraf|removedirs|remove|unlink"
    r"\w*|delete\w*|rmdir|truncate\w*)\s*\("
)
_PROGRAM_WORDS = re.compile(
    r"\s*(?:sudo\s+)?(?:/\S*/)?(?:rm|rmdir|shred|dd|mkfs\S*|wipefs|chmod|chown|find|rsync|mv|"
    r"truncate|curl|wget|git|sh|bash|zsh|eval|kill|pkill|truncate)\s"
)
_DANGEROUS_PATH = re.compile(
    r"^(?:~.*|/|/(?:etc|usr|var|home|bin|sbin|lib|opt|root|boot|srv|Users)\b.*|\.\..*)$"
)


def _plain(code: str) -> str:
    """The code with what hides a name or a string undone: adjacent strings joined
    (``"shu"+"til"``, Perl's ``.``, Lua's ``..``, awk's juxtaposition),
    ``__import__('os')`` and ``require("os")`` as ``os``, ``getattr(m, "f")`` as ``m.f``
    and ``m["f"](…)`` as ``m.f(…)``."""
    for _ in range(16):
        folded = _FOLD.sub(
            lambda m: _quote((_literal(m.group(1)) or "") + (_literal(m.group(2)) or "")), code
        )
        if folded == code:
            break
        code = folded
    code = _IMPORTED.sub(r"\1", code)
    code = _GETATTR.sub(r"\1.\2", code)
    return _INDEXED.sub(r".\1", code)


def _decoded(code: str) -> list[str]:
    """Code the code runs from a string: ``exec("…")``, base64 decoded and run."""
    import binascii

    found = [v for v in (_literal(m.group(1)) for m in _EVALUATED.finditer(code)) if v]
    for m in _ENCODED.finditer(code):
        try:
            data = binascii.a2b_base64("".join((m.group(1) or m.group(2)).split()))
        except (binascii.Error, ValueError):
            continue
        found.append(data.decode("utf-8", "replace"))
    return found


def _shell_strings(code: str) -> list[str]:
    """Where the code runs a shell at all, every string of it that reads as a command
    line (``cmd = "rm -rf " + home; system(cmd)``): what it runs may be any of them."""
    if not _EXECUTES.search(code):
        return []
    literals = [v for v in (_literal(m.group(0)) for m in re.finditer(_STRING, code)) if v]
    return [v for v in literals if _PROGRAM_WORDS.match(v + " ")]


def _deleted_anyhow(code: str, commands: list[list[str]]) -> list[list[str]]:
    """Where the code deletes or empties files and names the home directory, the root,
    a system directory or the parent (in a string or however it asks for it), ``rm -rf``
    of that path: a loop over ``os.walk(home)`` deletes under home whatever its calls
    say."""
    if not _DELETES.search(code):
        return []
    text = _STRING_OR_HOME.sub(_home_as_literal, code)
    known = {c[-1] for c in commands}
    paths = [v for v in (_literal(m.group(0)) for m in re.finditer(_STRING, text)) if v]
    return [
        ["rm", "-rf", p]
        for p in dict.fromkeys(paths)
        if _DANGEROUS_PATH.match(p) and p not in known
    ]


def _awk_program(args: list[str]) -> str | None:
    """awk's program: the value of ``-e``/``--source``, else its first operand."""
    k = 0
    while k < len(args):
        arg = args[k]
        if arg in ("-e", "--source"):
            return args[k + 1] if k + 1 < len(args) else None
        if arg in ("-f", "--file"):
            return None
        if arg in ("-F", "-v", "--assign", "--field-separator"):
            k += 2
            continue
        if arg == "--":
            return args[k + 1] if k + 1 < len(args) else None
        if not arg.startswith("-"):
            return arg
        k += 1
    return None


def _perl_written(args: list[str]) -> str | None:
    """The file a Perl ``open`` truncates: ``open(F, ">", PATH)``, ``open(F, ">PATH")``."""
    mode = _literal(args[1]) if len(args) > 1 else None
    if mode is None:
        return None
    if len(args) > 2 and mode.strip().startswith((">", "+>")) and not mode.startswith(">>"):
        return args[2]
    if len(args) == 2 and mode.startswith(">") and not mode.startswith(">>"):
        return _quote(mode[1:].strip())
    return None


def _arguments(code: str, start: int, limit: int = 8) -> list[str]:
    """The comma-separated arguments from ``start`` up to the closing parenthesis (or
    the end of the statement, for a call without one), as source text."""
    args: list[str] = []
    depth, quote, begin, k = 0, "", start, start
    while k < len(code) and len(args) < limit:
        ch = code[k]
        if quote:
            if ch == "\\":
                k += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}" and depth:
            depth -= 1
        elif (ch in ")]};\n" and not depth) or (ch == "," and not depth):
            args.append(code[begin:k].strip())
            if ch != ",":
                break
            begin = k + 1
        k += 1
    else:
        if k >= len(code) and code[begin:].strip():
            args.append(code[begin:].strip())
    return [a for a in args if a]


def _literal(expr: str) -> str | None:
    """The value of a string literal (escapes of quotes and backslashes undone)."""
    expr = expr.strip()
    if re.fullmatch(_STRING, expr):
        body = expr.lstrip("rRbBuUfF")[1:-1]
        return re.sub(r"\\(.)", r"\1", body)
    return None


def _words(expr: str) -> list[str] | None:
    """A list of string literals (``['rm', '-rf', p]``); a word that is no literal makes
    the list unknown at its place (``?``)."""
    expr = expr.strip()
    if not (expr.startswith("[") and expr.endswith("]")) or len(expr) < 3:
        return None
    items = _arguments(expr[1:-1] + ")", 0, 64)
    words = []
    for item in items:
        literal = _literal(item)
        words.append(literal if literal is not None else _path(item) or "?")
    return words or None


def _path(expr: str) -> str | None:
    """The path an expression makes, where it can be read (see the module docstring)."""
    text = _STRING_OR_HOME.sub(_home_as_literal, expr.strip())
    text = _USER.sub("'$USER'", text)
    text = _CWD.sub("'.'", text)
    text = _PARENT.sub("'..'", text)
    for _ in range(8):  # from the inside out
        before = text
        text = re.sub(
            rf"(?:os\.path\.|File\.|path\.)?join\(\s*({_STRING}(?:\s*,\s*{_STRING})*)\s*\)",
            lambda m: _quote("/".join(_literals(m.group(1)))),
            text,
        )
        text = re.sub(
            rf"(?:os\.path\.|File\.|path\.)?dirname\(\s*({_STRING})\s*\)",
            lambda m: _quote(_parent(_literal(m.group(1)) or "")),
            text,
        )
        text = re.sub(rf"(?:pathlib\.)?Path\(\s*({_STRING})\s*\)(?:\.expanduser\(\))?", r"\1", text)
        text = re.sub(
            rf"({_STRING})\.parent\b", lambda m: _quote(_parent(_literal(m.group(1)) or "")), text
        )
        text = re.sub(
            rf"({_STRING})\s*(?:[+/]|\.\.?)?\s*({_STRING})",
            lambda m: _quote(
                _glue(_literal(m.group(1)) or "", _literal(m.group(2)) or "", m.group(0))
            ),
            text,
        )
        text = re.sub(
            rf"(?:glob|File\.expand_path|(?:os\.path\.)?expanduser|os\.path\.abspath|os\.path\.realpath|"
            rf"path\.resolve|realpathSync)\(\s*({_STRING})\s*\)",
            r"\1",
            text,
        )
        if text == before:
            break
    return _literal(text)


def _home_as_literal(m: re.Match[str]) -> str:
    """A string with the home directory interpolated in it made plain (``~``), or an
    expression for the home directory made the literal ``'~'``."""
    if m.group(1) is None:
        return "'~'"
    return _HOME_INSIDE.sub("~", m.group(1))


def _literals(text: str) -> list[str]:
    return [v for v in (_literal(m.group(0)) for m in re.finditer(_STRING, text)) if v is not None]


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _parent(path: str) -> str:
    """``dirname``: of a literal path its directory; of ``~``, ``.`` or a path ending in
    ``..``, the path with ``/..`` after it (what it names, not how it is spelt)."""
    stripped = path.rstrip("/") or "/"
    if stripped in ("~", ".", "..") or stripped.endswith(("/..", "/.")):
        return stripped + "/.."
    if "/" not in stripped:
        return "."
    return stripped.rsplit("/", 1)[0] or "/"


def _glue(left: str, right: str, source: str) -> str:
    """``left + right`` (concatenation: ``+`` or Perl's ``.``) or ``left / right`` (a
    pathlib join)."""
    between = re.sub(_STRING, "", source).strip()
    if between == "/":
        return left.rstrip("/") + "/" + right.lstrip("/")
    return left + right
