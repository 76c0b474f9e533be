"""Strings from outside pyembed in generated build files: validated or escaped.

A model's name (often its file name), its tensor and operator names, a
profile's name and region names, and options such as ``plan --section`` end up
in C sources, linker scripts, Makefiles and CMakeLists. Each one goes through
one of the functions here, chosen by the context it lands in:

* ``check_identifier`` / ``check_section``: where the text must be a C
  identifier or a linker section name (symbol names, ``__attribute__((section))``,
  linker-script section and MEMORY names) it is validated, and a bad value is an
  ArgumentError naming the argument;
* ``c_comment``: text inside ``/* ... */`` (C and linker scripts): one line,
  printable ASCII, no ``*/`` or ``/*`` (a space is put between the two
  characters), no trigraph;
* ``c_string``: a C string literal, quotes included, every byte outside
  printable ASCII as a three-digit octal escape;
* ``make_comment`` / ``cmake_comment``: text after ``#`` on one line, no
  trailing backslash that would continue it;
* ``make_shell_word``: one shell word in a Makefile recipe (single-quoted for
  the shell, ``$`` doubled for make, on one line).
"""
import re
import shlex

from pyembed.errors import ArgumentError

__all__ = ["check_identifier", "check_section", "c_comment", "c_string", "make_comment", "cmake_comment",
           "make_shell_word"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SECTION = re.compile(r"[A-Za-z_.][A-Za-z0-9_.]*\Z")
MAX_NAME = 128


def check_identifier(value, what):
    """value when it is a C identifier (letters, digits, underscores, not
    starting with a digit, at most 128 characters), else ArgumentError naming what."""
    if not isinstance(value, str) or len(value) > MAX_NAME or not _IDENT.match(value):
        raise ArgumentError(f"{what}: expected a C identifier (letters, digits and '_', not starting with a digit, "
                            f"at most {MAX_NAME} characters), got {value!r}")
    return value


def check_section(value, what):
    """value when it is a linker section name made of letters, digits, '_'
    and '.' (such as .pe_flash or .rodata.weights), else ArgumentError naming what."""
    if not isinstance(value, str) or len(value) > MAX_NAME or not _SECTION.match(value):
        raise ArgumentError(f"{what}: expected a linker section name of letters, digits, '_' and '.' "
                            f"(such as .pe_flash), got {value!r}")
    return value


def _printable(text):
    """text on one line of printable ASCII: a backslash doubled, anything else
    as a Python-style escape (\\n, \\x1b, \\u00e9)."""
    out = []
    for ch in str(text):
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif 32 <= o < 127:
            out.append(ch)
        elif ch in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
        elif o < 256:
            out.append(f"\\x{o:02x}")
        elif o < 0x10000:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    return "".join(out)


def c_comment(text):
    """text made safe inside a C or linker-script /* ... */ comment."""
    out = []
    for ch in _printable(text):
        if out and (out[-1], ch) in (("*", "/"), ("/", "*"), ("?", "?")):
            out.append(" ")
        out.append(ch)
    return "".join(out)


def c_string(text):
    """A C string literal (with its quotes) holding text's UTF-8 bytes."""
    out = ['"']
    for b in str(text).encode("utf-8", "surrogateescape"):
        ch = chr(b)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "?":
            out.append("\\?")          # never a trigraph
        elif 32 <= b < 127:
            out.append(ch)
        else:
            out.append(f"\\{b:03o}")   # octal: at most three digits, so the next character is never eaten
    out.append('"')
    return "".join(out)


def make_comment(text):
    """text made safe after '#' on one line of a Makefile (escaped to one line,
    so no backslash-newline can continue the comment into a rule)."""
    return _printable(text)


cmake_comment = make_comment


def make_shell_word(text):
    """text as one word of a Makefile recipe line: quoted for the shell, '$'
    doubled so make passes it on literally, on one line."""
    return shlex.quote(_printable(text)).replace("$", "$$")
