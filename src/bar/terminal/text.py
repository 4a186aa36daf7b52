"""The plain text a reader of a terminal would have seen, from the bytes a program wrote.

``TextCleaner`` cleans a stream line by line: escape sequences are dropped and
carriage-return redraws are collapsed. Only the current line is held, so an endless
progress bar costs constant memory. Cursor movement to another row cannot be followed
without a screen model, so it ends the current line; full-screen redraws therefore show
up as successive frames (a pty step's cast has the exact picture).

A pty step's text is cleaned as it is recorded, into its output file
(``bar.terminal.textref``); ``bar.terminal.cast.text_of_cast`` derives it from a
recording alone, for the pty steps of an earlier bar, which kept no output file.
"""

from __future__ import annotations

import codecs
import re

_NORMAL, _ESC, _ESC_INTER, _CSI, _STRING, _STRING_ESC = range(6)
_SPECIAL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_STRING_END = re.compile(r"[\x07\x1b\x9c]")
_MAX_LINE = 1 << 20  # cells; a line longer than this is written out as it stands
# whole lines of plain text, each ended by LF (a CR or more before it): most of what a
# program prints, cleaned at once rather than a run at a time
_PLAIN_LINES = re.compile(r"(?:[^\x00-\x1f\x7f-\x9f]*\r*\n)+")
_ASCII_LINES = bytes(range(0x20, 0x7F)) + b"\r\n"
_FIRST_SPAN = 256  # characters of plain lines looked for at first (``_plain_lines``)
_MAX_PARAMS = 64  # a CSI longer than this is garbage, not a command


def _plain_ascii(text: str) -> bool:
    """Whether ``text`` is printable ASCII and line ends (a CR only before an LF): the
    bytes' own operations tell at memory speed, where a regex reads a character at a time."""
    if not text.isascii():
        return False
    data = text.encode("ascii")
    return not data.translate(None, _ASCII_LINES) and data.count(b"\r") == data.count(b"\r\n")


class TextCleaner:
    """Turn a terminal byte stream into the plain text a reader would have seen.

    ``feed()`` returns the lines completed so far (each ending in ``\\n``), ``finish()``
    the last one. Emulated: printable text overwrites at the cursor column; CR, BS, TAB;
    LF/VT/FF end the line; CSI K/J erase, C/D/G/` move within the line, P/X/@ delete,
    erase and insert; save/restore of the column. Sequences dropped without effect:
    the rest of CSI (colours, modes), OSC (BEL- or ST-terminated), DCS/SOS/PM/APC,
    charset selections and other escape sequences. Trailing spaces are trimmed.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._cells: list[str] = []
        self._col = 0
        self._saved_col = 0
        self._state = _NORMAL
        self._params = ""
        self._out: list[str] = []

    def feed(self, data: bytes) -> str:
        self._feed_text(self._decoder.decode(data))
        return self._take()

    def feed_str(self, text: str) -> str:
        """``feed`` for text already decoded (a cast's events)."""
        self._feed_text(text)
        return self._take()

    def finish(self) -> str:
        self._feed_text(self._decoder.decode(b"", final=True))
        if "".join(self._cells).strip(" "):
            self._newline()
        self._cells, self._col = [], 0
        return self._take()

    @property
    def holding(self) -> bool:
        """Whether text fed so far is still held (a line not ended yet)."""
        return bool(self._cells)

    def _take(self) -> str:
        text = "".join(self._out)
        self._out.clear()
        return text

    def _feed_text(self, text: str) -> None:
        i, n = self._plain_lines(text, 0), len(text)
        while i < n:
            state = self._state
            if state == _NORMAL:
                match = _SPECIAL.search(text, i)
                end = match.start() if match else n
                if end > i:
                    self._put(text[i:end])
                if match is None:
                    return
                self._control(text[end])
                i = end + 1
                if text[end] == "\n":  # a line ended: plain ones may follow
                    i = self._plain_lines(text, i)
            elif state == _STRING:
                # OSC, DCS and friends: skip to BEL, ST or an ESC (which may start ST).
                match = _STRING_END.search(text, i)
                if match is None:
                    return
                self._state = _STRING_ESC if match.group() == "\x1b" else _NORMAL
                i = match.end()
            elif state == _STRING_ESC:
                if text[i] == "\\":
                    self._state = _NORMAL
                    i += 1
                else:  # an ESC that is not ST aborts the string and starts a sequence
                    self._state = _ESC
            else:
                self._escape_char(text[i])
                i += 1

    def _plain_lines(self, text: str, start: int) -> int:
        """Clean the whole lines of plain text at ``text[start:]``, when no line is
        begun (what ``_put`` and ``_newline`` would make of them: each line as it is,
        trailing spaces trimmed); where that left off. The stretch looked at grows
        while it is plain and starts small, so a stream of coloured lines, where this
        fails at every line, costs little more than the run at a time."""
        if self._cells or self._col or self._state != _NORMAL:
            return start
        done, span = start, _FIRST_SPAN
        # (a stretch of at most _MAX_LINE characters: no line cleaned here reaches it)
        while done < len(text):
            end = text.rfind("\n", done, done + span) + 1
            if not end:  # no line ends within it: a longer one, or the stream's end
                if span >= _MAX_LINE or done + span >= len(text):
                    break
                span = min(span * 4, _MAX_LINE)
                continue
            window = text[done:end]
            plain = _plain_ascii(window)
            if not plain:  # the plain lines it starts with, if any
                match = _PLAIN_LINES.match(text, done, end)
                if match is None:
                    break
                window, end = match.group(), match.end()
            lines = window.replace("\r", "")
            if " \n" in lines:
                lines = "\n".join(line.rstrip(" ") for line in lines.split("\n"))
            self._out.append(lines)
            done = end
            if not plain:
                break
            span = min(span * 4, _MAX_LINE)
        return done

    def _escape_char(self, ch: str) -> None:
        code = ord(ch)
        if ch == "\x1b":
            self._state = _ESC
        elif code < 0x20:  # controls are executed even inside a sequence
            self._control(ch)
        elif self._state == _ESC:
            self._state = _NORMAL
            if ch == "[":
                self._state, self._params = _CSI, ""
            elif ch in "]PX^_":
                self._state = _STRING
            elif 0x20 <= code <= 0x2F:  # intermediates: charset selection, ESC # 8, ...
                self._state = _ESC_INTER
            elif ch in "DE":  # index, next line
                self._newline()
            elif ch == "M":  # reverse index: another row
                self._break_line()
            elif ch == "7":
                self._saved_col = self._col
            elif ch == "8":
                self._col = self._saved_col
        elif self._state == _ESC_INTER:
            if not 0x20 <= code <= 0x2F:
                self._state = _NORMAL
        elif 0x20 <= code <= 0x3F:  # CSI parameters and intermediates
            self._params += ch
            if len(self._params) > _MAX_PARAMS:
                self._state = _NORMAL
        else:
            self._state = _NORMAL
            if 0x40 <= code <= 0x7E:
                self._csi(self._params, ch)

    def _control(self, ch: str) -> None:
        if ch == "\r":
            self._col = 0
        elif ch in "\n\x0b\x0c":
            self._newline()
        elif ch == "\b":
            self._col = max(0, self._col - 1)
        elif ch == "\t":
            self._col = (self._col // 8 + 1) * 8
        elif ch == "\x1b":
            self._state = _ESC
        elif ch == "\x9b":
            self._state, self._params = _CSI, ""
        elif ch in "\x90\x98\x9d\x9e\x9f":
            self._state = _STRING
        # Anything else (BEL, SO/SI, NUL, DEL, other C1) shows nothing.

    def _csi(self, params: str, final: str) -> None:
        private = params[:1] in ("?", ">", "<", "=")
        body = params.lstrip("?><=")
        if any(0x20 <= ord(c) <= 0x2F for c in body):
            return  # intermediates: cursor style and the like
        args = [int(p) if p.isdigit() else 0 for p in body.replace(":", ";").split(";")]
        first = args[0]
        count = max(first, 1)
        cells = self._cells
        if final in "KJ":
            if first == 0:
                del cells[self._col :]
            elif first == 1:
                for k in range(min(self._col + 1, len(cells))):
                    cells[k] = " "
            else:
                cells.clear()
        elif private:
            return  # modes, device attributes: no effect on the text
        elif final == "C":
            self._col += count
        elif final == "D":
            self._col = max(0, self._col - count)
        elif final in "G`":
            self._col = count - 1
        elif final == "P":
            del cells[self._col : self._col + count]
        elif final == "X":
            for k in range(self._col, min(self._col + count, len(cells))):
                cells[k] = " "
        elif final == "@":
            if self._col < len(cells):
                cells[self._col : self._col] = [" "] * count
        elif final in "ABEFd":  # to another row: this line is as final as we can know
            self._break_line()
            if final in "EF":
                self._col = 0
        elif final in "Hf":
            self._break_line()
            self._col = max(args[1] if len(args) > 1 else 1, 1) - 1
        elif final == "s":
            self._saved_col = self._col
        elif final == "u":
            self._col = self._saved_col

    def _put(self, run: str) -> None:
        cells, col = self._cells, self._col
        if col > len(cells):
            cells.extend(" " * (col - len(cells)))
        cells[col : col + len(run)] = run
        self._col = col + len(run)
        if len(cells) > _MAX_LINE:
            self._newline()

    def _newline(self) -> None:
        self._out.append("".join(self._cells).rstrip(" ") + "\n")
        self._cells = []
        self._col = 0

    def _break_line(self) -> None:
        if "".join(self._cells).strip(" "):
            col = self._col
            self._newline()
            self._col = col
        else:
            self._cells = []


def clean_text(data: bytes) -> str:
    """Clean a whole terminal stream at once (see ``TextCleaner``)."""
    cleaner = TextCleaner()
    return cleaner.feed(data) + cleaner.finish()
