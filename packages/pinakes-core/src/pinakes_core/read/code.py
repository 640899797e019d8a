"""Code files as documents (issue 18): sections at top-level definitions, identifiers for BM25.

Code is opt-in: a KB indexes code files only when ``[sync] include`` names them (for example
``"**/*.py"``). A code file is cut into *sections*, each a top-level definition with the lines
that belong to it, and each section is chunked on its own (so a chunk never spans two
definitions) with the definition's symbol path as its heading path:

- **Python** is parsed with :mod:`ast`. A top-level ``def``/``class`` is a section from its
  first decorator (and the comment lines right above it) to its last line; a class larger than
  the chunk budget is split into its header and one section per method (``Class › method``).
  Statements between definitions (imports, constants, ``if __name__ …``) form sections with an
  empty heading path. A file that does not parse falls back to the heuristic below.
- **Other languages** use a line heuristic: a section starts at a line with no indentation
  that opens a definition (``function``, ``class``, ``interface``, ``struct``, ``enum``,
  ``trait``, ``impl``, ``fn``, ``func``, ``def``, ``module``, ``namespace``, ``type``, a
  top-level ``const``/``let``/``var``, or a C-like ``type name(…)`` signature that does not end
  in ``;``), together with the comment, attribute and decorator lines right above it; it runs to
  the next such line. Its symbol is the defined name (``Receiver.Method`` for Go methods).

Identifiers are kept searchable: :func:`identifier_terms` lists the parts of every compound
identifier (``parse_http_response`` → ``parse http response parsehttpresponse``,
``getUserName`` → ``get user name``), which sync indexes in the chunk's own FTS column
(``idents``) so "user name" finds ``getUserName`` and ``parseHttpResponse`` finds
``parse_http_response``; Markdown chunks leave that column empty, so their BM25 is unchanged.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

__all__ = ["CODE_SUFFIXES", "Section", "code_sections", "identifier_terms", "is_code"]

#: File suffixes treated as code (lower case). Only files the include globs select are read.
CODE_SUFFIXES = frozenset(
    [
        ".py",
        ".pyi",
        ".js",
        ".mjs",
        ".cjs",
        ".jsx",
        ".ts",
        ".tsx",
        ".mts",
        ".cts",
        ".go",
        ".rs",
        ".java",
        ".kt",
        ".kts",
        ".scala",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".cxx",
        ".hpp",
        ".hh",
        ".hxx",
        ".cs",
        ".swift",
        ".rb",
        ".php",
        ".lua",
        ".sh",
        ".bash",
        ".zsh",
        ".sql",
        ".r",
        ".jl",
        ".ex",
        ".exs",
        ".erl",
        ".hs",
        ".ml",
        ".mli",
        ".clj",
        ".dart",
        ".m",
        ".mm",
        ".pl",
        ".pm",
        ".ps1",
        ".vue",
        ".svelte",
        ".zig",
        ".nim",
    ]
)

#: A section: its symbol path, and its first and last line (0-based, end exclusive).
Section = tuple[tuple[str, ...], int, int]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# Most extra terms one chunk gets (a generated file full of identifiers stays bounded).
_MAX_TERMS = 2_000

_LEADING = re.compile(r"^(?:#|//|/\*|\*|@|--|;;|%|\"\"\"|'''|#\[|\[)")
_DEFINITIONS = [
    re.compile(r"^func\s+\(\s*\w+\s+\*?\s*(?P<recv>\w+)[^)]*\)\s*(?P<name>\w+)"),  # Go method
    re.compile(
        r"^(?:(?:export|default|pub(?:\([\w:]+\))?|public|private|protected|internal|static|"
        r"abstract|final|sealed|open|async|unsafe|extern|inline|declare|partial|data|"
        r"override)\s+)*"
        r"(?:function\*?|class|interface|struct|enum|trait|impl(?:<[^>]*>)?|fn|func|def|"
        r"module|namespace|type|record|object|protocol|extension|union|const|let|var|"
        r"static|macro_rules!|subroutine|sub|proc)\s+(?:self\.)?(?P<name>[A-Za-z_][\w$.]*[?!]?)"
    ),
    # A C-like definition: "int main(…)", "static void *worker(…) {" (a prototype ends in ';').
    re.compile(
        r"^(?!(?:if|for|while|switch|return|else|do|case)\b)[A-Za-z_][\w\s\*&<>,:]*?\b(?P<name>\w+)\s*\([^;]*$"
    ),
    re.compile(r"^(?:function\s+)?(?P<name>[A-Za-z_][\w-]*)\s*\(\)\s*\{"),  # shell function
]


def is_code(rel: str) -> bool:
    """Whether the KB-relative path ``rel`` names a code file (by suffix)."""
    dot = rel.rfind(".")
    return dot > rel.rfind("/") and rel[dot:].lower() in CODE_SUFFIXES


def identifier_terms(text: str) -> str:
    """Return the extra BM25 terms for the identifiers in ``text`` (space-separated).

    For every identifier made of several words (``snake_case``, ``camelCase``,
    ``HTTPServer2``), its lower-cased parts, and for one containing ``_`` also its parts
    joined (``parsehttpresponse``), which the tokenizer would otherwise never produce. Plain
    words add nothing (the text column has them).
    """
    terms: dict[str, None] = {}
    for ident in dict.fromkeys(_IDENT.findall(text)):
        parts = [p.lower() for piece in ident.split("_") for p in _PARTS.findall(piece)]
        if len(parts) < 2:
            continue
        for part in parts:
            terms.setdefault(part, None)
        if "_" in ident.strip("_"):
            terms.setdefault("".join(parts), None)
        if len(terms) >= _MAX_TERMS:
            break
    return " ".join(terms)


def code_sections(text: str, suffix: str, *, large: int) -> list[Section]:
    """Cut a code file into sections (see the module docstring).

    Args:
        text: the file (newlines normalised to LF).
        suffix: the file's suffix, lower case (``".py"`` selects the :mod:`ast` path).
        large: a line count above which a Python class is split into its methods (sync passes
            a rough line equivalent of the chunk budget).

    Returns:
        Sections in file order, covering every line that is not blank.
    """
    lines = text.split("\n")
    if suffix in (".py", ".pyi"):
        try:
            return _python_sections(text, lines, large)
        except (SyntaxError, ValueError, RecursionError):
            pass
    return _heuristic_sections(lines)


def _leading(lines: Sequence[str], start: int) -> int:
    """Move ``start`` up over the comment/decorator lines directly above a definition."""
    while start > 0 and lines[start - 1].strip() and _LEADING.match(lines[start - 1].lstrip()):
        start -= 1
    return start


def _python_sections(text: str, lines: list[str], large: int) -> list[Section]:
    tree = ast.parse(text)
    defs: list[Section] = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
        start, end = _leading(lines, first), node.end_lineno or node.lineno
        if isinstance(node, ast.ClassDef) and end - start > large:
            methods = [
                n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
            cursor = start
            for method in methods:
                m_first = min([method.lineno, *(d.lineno for d in method.decorator_list)]) - 1
                m_start = _leading(lines, m_first)
                if any(line.strip() for line in lines[cursor:m_start]):
                    defs.append(((node.name,), cursor, m_start))  # the header, class attributes
                cursor = max(cursor, m_start)
                m_end = method.end_lineno or method.lineno
                defs.append(((node.name, method.name), cursor, m_end))
                cursor = m_end
            if any(line.strip() for line in lines[cursor:end]):
                defs.append(((node.name,), cursor, end))
            continue
        defs.append(((node.name,), start, end))
    return _with_gaps(defs, len(lines))


def _with_gaps(defs: Sequence[Section], count: int) -> list[Section]:
    """Add the module-level stretches between definitions as sections with no symbol.

    (A stretch of blank lines makes an empty section, which yields no chunk.)
    """
    sections: list[Section] = []
    cursor = 0
    for path, start, end in [*defs, ((), count, count)]:
        if start > cursor:
            sections.append(((), cursor, start))
        if end > max(start, cursor):
            sections.append((path, max(start, cursor), end))
        cursor = max(cursor, end)
    return sections


def _symbol(line: str) -> str | None:
    if not line or line[0].isspace() or line.rstrip().endswith(";"):
        return None
    for pattern in _DEFINITIONS:
        match = pattern.match(line)
        if match:
            recv = match.groupdict().get("recv")
            name = match.group("name")
            return f"{recv}.{name}" if recv else name
    return None


def _heuristic_sections(lines: list[str]) -> list[Section]:
    starts: list[tuple[str, int]] = []
    for index, line in enumerate(lines):
        name = _symbol(line)
        if name is not None:
            start = _leading(lines, index)
            if starts and start <= starts[-1][1]:
                start = index  # comments above belong to the previous definition already
            starts.append((name, start))
    defs = [
        ((name,), start, starts[i + 1][1] if i + 1 < len(starts) else len(lines))
        for i, (name, start) in enumerate(starts)
    ]
    return _with_gaps(defs, len(lines))
