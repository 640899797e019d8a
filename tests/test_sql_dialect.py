"""SQL above the store is written in the common dialect of SQLite ≥ 3.35 and PostgreSQL (issue 38).

Code above the store runs the same statements on a SQLite store and, through the PostgreSQL
connection adapter (which rewrites ``?`` to ``%s`` and nothing else), on a PostgreSQL one. This
test reads the source of every package (AST, no import): the statements passed to ``execute`` /
``executemany``, every other string literal that starts with an upper-case SQL verb and the
condition fragments statements are built from (a ``?`` after an operator, a collation, a
sub-select), outside
the modules that are the store or engine-specific on purpose (:data:`ENGINE_MODULES`) and the
FTS5 statements on ``chunks_fts`` (the lexical channel's, behind the store on PostgreSQL). It
fails on the SQLite-only constructs of BRIEF38 §1 (:data:`RULES`), naming file, line and fix.
Docstrings and prose are not read: a literal counts only when it is an ``execute`` argument,
starts with a verb in capitals (``"Delete the line"`` is prose, ``"DELETE FROM …"`` is SQL) or
holds one of those fragment marks.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: Modules that hold the store or one engine's lexical/dense index: their SQL is engine-specific
#: by design (paths relative to ``packages/*/src``).
ENGINE_MODULES = frozenset(
    {
        "pinakes_core/index/store.py",
        "pinakes_core/index/tables.py",
        "pinakes_core/index/pgstore.py",
        "pinakes_core/index/backend.py",
        "pinakes_core/index/dense.py",
        "pinakes_core/index/lexical.py",
        "pinakes_core/index/bm25.py",
        "pinakes_core/index/pgsearch.py",
    }
)

#: Known sites another stream of issue 38 converts: (module, rule) -> who and why. An entry
#: that no longer matches anything fails the test, so the list only shrinks.
PENDING: dict[tuple[str, str], str] = {}  # none left (issue 38)

#: A literal outside an ``execute`` call is SQL when it starts with one of these, in capitals.
_VERB = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|REPLACE|PRAGMA|BEGIN|COMMIT|ROLLBACK|SAVEPOINT"
    r"|RELEASE|CREATE|DROP|ALTER|ATTACH|DETACH|VACUUM)\b"
)
#: …or is a condition a statement is built from: an operator before a ``?`` placeholder, a
#: collation, or a sub-select (``"d.doc_id IN (SELECT doc_id FROM doc_meta WHERE key = ?"``).
_FRAGMENT = re.compile(
    r"(?:[=<>]|\bIN\s*\(|\bLIKE)\s*\?(?=[\s),]|$)|\bCOLLATE\s+\w+|\bIN\s*\(\s*SELECT\b"
)
_QUOTED = re.compile(r"'(?:[^']|'')*'")
_EXPR = "__expr__"  # what an f-string's {…} reads as


@dataclass(frozen=True)
class Finding:
    """One SQLite-only construct in one statement."""

    module: str
    line: int
    rule: str
    fix: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line}: {self.rule} — {self.fix}"


def _scalar_min_max(sql: str) -> bool:
    """Whether ``sql`` calls ``MAX``/``MIN`` with two or more arguments (SQLite's scalar form)."""
    for match in re.finditer(r"\b(MAX|MIN)\s*\(", sql, re.IGNORECASE):
        depth, commas = 1, 0
        for ch in sql[match.end() :]:
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    break
            elif ch == "," and depth == 1:
                commas += 1
        if commas:
            return True
    return False


def _having_alias(sql: str) -> bool:
    """Whether a ``HAVING`` clause names an output alias (PostgreSQL only takes expressions)."""
    having = re.search(r"\bHAVING\b(.*?)(\bORDER\s+BY\b|\bLIMIT\b|$)", sql, re.I | re.S)
    if having is None:
        return False
    aliases = set(re.findall(r"\bAS\s+(\w+)", sql, re.IGNORECASE))
    return any(re.search(rf"\b{re.escape(a)}\b", having.group(1)) for a in aliases)


def _rowid_elsewhere(sql: str) -> bool:
    """``rowid`` in a statement on no table that PostgreSQL mirrors with a ``rowid`` column."""
    if not re.search(r"\browid\b", sql, re.IGNORECASE):
        return False
    return not re.search(r"\b(FROM|JOIN|UPDATE|INTO)\s+(links|doc_meta)\b", sql, re.IGNORECASE)


def _pattern(regex: str, flags: int = re.IGNORECASE) -> Callable[[str], bool]:
    compiled = re.compile(regex, flags)
    return lambda sql: compiled.search(sql) is not None


#: (rule, test on the statement with its quoted literals blanked, fix). BRIEF38 §1.
RULES: tuple[tuple[str, Callable[[str], bool], str], ...] = (
    (
        "INSERT OR IGNORE/REPLACE",
        _pattern(r"\bINSERT\s+OR\s+(IGNORE|REPLACE|ABORT|FAIL|ROLLBACK)\b|^\s*REPLACE\s+INTO\b"),
        "use INSERT … ON CONFLICT (cols) DO NOTHING / DO UPDATE SET c = excluded.c",
    ),
    ("instr", _pattern(r"\binstr\s*\("), "use position(), a LIKE, or do it in Python"),
    ("ifnull", _pattern(r"\bifnull\s*\("), "use coalesce()"),
    ("group_concat", _pattern(r"\bgroup_concat\s*\("), "aggregate in Python"),
    ("json functions", _pattern(r"\bjson(_\w+)?\s*\("), "JSON is TEXT: decode it in Python"),
    (
        "SQLite-only function",
        _pattern(
            r"\b(iif|printf|strftime|julianday|unixepoch|typeof|randomblob|zeroblob|likelihood"
            r"|last_insert_rowid|changes|total_changes|sqlite_\w+)\s*\("
        ),
        "use CASE WHEN / coalesce, or do it in Python",
    ),
    (
        "scalar MAX/MIN",
        _scalar_min_max,
        "MAX(a, b)/MIN(a, b) are aggregates on PostgreSQL: CASE WHEN",
    ),
    ("GLOB", _pattern(r"\bGLOB\b"), "use LIKE with an escaped pattern parameter, or Python"),
    ("PRAGMA", _pattern(r"\bPRAGMA\b"), "engine settings belong to the store"),
    (
        "sqlite_master",
        _pattern(r"\bsqlite_(master|schema|temp_master|sequence)\b"),
        "ask the store what it holds",
    ),
    (
        "transaction statement",
        _pattern(r"^\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE)\b"),
        "use store.transaction()",
    ),
    ("ATTACH", _pattern(r"\b(ATTACH|DETACH)\s+DATABASE\b"), "open the other store instead"),
    (
        "COLLATE",
        _pattern(r"\bCOLLATE\b"),
        "no collation name is common to both engines: compare lower() values",
    ),
    ("INDEXED BY", _pattern(r"\b(NOT\s+)?INDEXED(\s+BY)?\b"), "leave plans to the planner"),
    ("== operator", _pattern(r"=="), "use ="),
    ("IS <value>", _pattern(r"\bIS\s+(NOT\s+)?\?"), "use IS [NOT] DISTINCT FROM ? or = ?"),
    ("LIMIT -1", _pattern(r"\bLIMIT\s+-"), "leave the LIMIT out"),
    (
        "placeholder other than ?",
        _pattern(r"(?<![:\w]):[A-Za-z_]\w*|\?\d|\$\d|%s", 0),
        "use ? (the PostgreSQL adapter rewrites only ?)",
    ),
    (
        "rowid of a table without one",
        _rowid_elsewhere,
        "only links and doc_meta have a rowid column on PostgreSQL: use the table's key",
    ),
    ("HAVING on an alias", _having_alias, "repeat the aggregate in HAVING"),
)


def findings_of(sql: str) -> list[tuple[str, str]]:
    """The rules ``sql`` breaks, as ``(rule, fix)`` pairs, in :data:`RULES` order."""
    found = []
    if "%" in sql:
        found.append(("literal %", "pass LIKE patterns as parameters (psycopg reads % itself)"))
    bare = _QUOTED.sub("''", sql)
    found.extend((rule, fix) for rule, test, fix in RULES if test(bare))
    return found


def _text(node: ast.expr) -> str | None:
    """The string an expression builds, f-string parts read as an identifier; else ``None``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else _EXPR
            for v in node.values
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        if left is not None and right is not None:
            return left + right
    return None


def _docstrings(tree: ast.Module) -> set[int]:
    """Ids of the docstring nodes of a module, its classes and functions."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def statements(source: str) -> Iterator[tuple[int, str]]:
    """``(line, sql)`` of every SQL statement written in ``source`` (see the module docstring)."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    seen: set[int] = set()
    for node in ast.walk(tree):
        candidates: list[tuple[ast.expr, bool]] = []
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("execute", "executemany")
            and node.args
        ):
            candidates.append((node.args[0], True))
        elif isinstance(node, ast.Constant | ast.JoinedStr | ast.BinOp):
            candidates.append((node, False))
        for expr, executed in candidates:
            if id(expr) in seen or id(expr) in skip:
                continue
            sql = _text(expr)
            if sql is None or not (executed or _VERB.match(sql) or _FRAGMENT.search(sql)):
                continue
            seen.add(id(expr))
            # The parts of a concatenation are literals too: read the whole, not its pieces.
            seen.update(id(n) for n in ast.walk(expr))
            if "chunks_fts" not in sql:
                yield expr.lineno, sql


def module_findings(module: str, source: str) -> list[Finding]:
    """Every SQLite-only construct in the SQL and calls of one module's ``source``."""
    found = [
        Finding(module, line, r, f) for line, sql in statements(source) for r, f in findings_of(sql)
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "lastrowid":
            found.append(Finding(module, node.lineno, "lastrowid", "use INSERT … RETURNING key"))
        if isinstance(node, ast.Attribute) and node.attr == "executescript":
            found.append(Finding(module, node.lineno, "executescript", "run statements one by one"))
    return sorted(found, key=lambda f: (f.line, f.rule))


def package_modules() -> Iterator[tuple[str, Path]]:
    """``(module path relative to src, file)`` of every package module above the store."""
    for path in sorted(REPO.glob("packages/*/src/**/*.py")):
        module = path.relative_to(path.parents[len(path.relative_to(REPO).parts) - 4]).as_posix()
        if module not in ENGINE_MODULES:
            yield module, path


def test_sql_above_the_store_is_in_the_common_dialect() -> None:
    found = [f for m, p in package_modules() for f in module_findings(m, p.read_text("utf-8"))]
    broken = [str(f) for f in found if (f.module, f.rule) not in PENDING]
    assert not broken, "SQLite-only SQL above the store (BRIEF38 §1):\n" + "\n".join(broken)
    stale = sorted(set(PENDING) - {(f.module, f.rule) for f in found})
    assert not stale, f"converted: remove these from PENDING: {stale}"


def test_every_package_is_read() -> None:
    modules = dict(package_modules())
    for package in ("pinakes_core", "pinakes_graph", "pinakes_ner", "pinakes_cli", "pinakes_mcp"):
        assert f"{package}/__init__.py" in modules
    assert "pinakes_core/index/writer.py" in modules
    assert "pinakes_core/index/store.py" not in modules


@pytest.mark.parametrize(
    ("sql", "rule"),
    [
        (
            "INSERT OR IGNORE INTO vectors(embed_hash, vector) VALUES (?, ?)",
            "INSERT OR IGNORE/REPLACE",
        ),
        (
            "INSERT OR REPLACE INTO ner_texts(embed_hash, entities) VALUES (?, ?)",
            "INSERT OR IGNORE/REPLACE",
        ),
        ("REPLACE INTO t(a) VALUES (?)", "INSERT OR IGNORE/REPLACE"),
        ("SELECT substr(path, 1, instr(path, '/')) FROM documents", "instr"),
        ("SELECT ifnull(title, '') FROM documents", "ifnull"),
        ("SELECT group_concat(tag) FROM doc_tags", "group_concat"),
        ("SELECT json_extract(meta, '$.a') FROM documents", "json functions"),
        ("SELECT iif(a, 1, 2) FROM t", "SQLite-only function"),
        ("UPDATE edges SET weight = MAX(weight, excluded.weight)", "scalar MAX/MIN"),
        ("SELECT min(a, coalesce(b, 0)) FROM t", "scalar MAX/MIN"),
        ("SELECT path FROM documents WHERE path GLOB ?", "GLOB"),
        ("PRAGMA foreign_keys = ON", "PRAGMA"),
        ("SELECT name FROM sqlite_master WHERE type = 'table'", "sqlite_master"),
        ("BEGIN", "transaction statement"),
        ("BEGIN IMMEDIATE", "transaction statement"),
        ("COMMIT", "transaction statement"),
        ("SELECT path FROM documents ORDER BY title COLLATE NOCASE", "COLLATE"),
        ("SELECT 1 FROM t WHERE a == ?", "== operator"),
        ("SELECT 1 FROM t WHERE a IS ?", "IS <value>"),
        ("SELECT 1 FROM t LIMIT -1 OFFSET ?", "LIMIT -1"),
        ("SELECT 1 FROM t WHERE a = :name", "placeholder other than ?"),
        ("SELECT 1 FROM t WHERE a = ?1", "placeholder other than ?"),
        ("SELECT 1 FROM t WHERE a = $1", "placeholder other than ?"),
        ("SELECT rowid FROM documents", "rowid of a table without one"),
        (
            "SELECT e.src, COUNT(*) AS n FROM edges e GROUP BY e.src HAVING n > ?",
            "HAVING on an alias",
        ),
        ("SELECT path FROM documents WHERE path LIKE 'a%'", "literal %"),
    ],
)
def test_each_sqlite_only_construct_is_named(sql: str, rule: str) -> None:
    assert rule in [r for r, _ in findings_of(sql)]


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO vectors(embed_hash, vector) VALUES (?, ?) ON CONFLICT (embed_hash) DO NOTHING",
        "INSERT INTO edges(src, dst, kind, weight) VALUES (?, ?, ?, ?) ON CONFLICT(src, dst, kind) "
        "DO UPDATE SET weight = CASE WHEN excluded.weight > edges.weight THEN excluded.weight "
        "ELSE edges.weight END",
        "INSERT INTO nodes(kind, key, label) VALUES (?, ?, ?) RETURNING node_id",
        "SELECT MAX(weight), MIN(d.path), COUNT(*) FROM edges",
        "SELECT l.rowid, d.path FROM links l JOIN documents d ON d.doc_id = l.src_doc ORDER BY l.rowid",
        "UPDATE links SET dst_kb = ?, dst_doc = ?, reason = ? WHERE rowid = ?",
        "SELECT doc_id, key FROM doc_meta ORDER BY doc_id, rowid",
        "SELECT value FROM meta WHERE key = 'a:b' AND note = 'x == y, instr(, BEGIN'",
        "SELECT title || ' — ' || path FROM documents WHERE mtime_ns IS NOT NULL AND a IS NULL",
        "SELECT e.src, COUNT(*) AS n FROM edges e GROUP BY e.src HAVING COUNT(*) > ? ORDER BY n",
        "WITH x AS (SELECT 1) SELECT * FROM x",
        "DELETE FROM meta WHERE key IN ('ner_settings', 'ner_serial')",
    ],
)
def test_common_dialect_passes(sql: str) -> None:
    assert findings_of(sql) == []


def test_statements_are_found_and_prose_is_not() -> None:
    source = '''
"""Module docstring: SELECT the best, INSERT OR IGNORE nothing."""
def f(conn, xs):
    """DELETE FROM nowhere; this is a docstring."""
    conn.execute("BEGIN")
    conn.execute(
        "INSERT OR IGNORE INTO vectors(embed_hash, vector) "
        "VALUES (?, ?)"
    )
    conn.execute(f"SELECT a FROM t WHERE b IN ({','.join('?' * len(xs))}) AND ifnull(c, 0)")
    conn.execute("SELECT x " + "FROM t WHERE y GLOB ?")
    node = conn.execute("INSERT INTO nodes(kind) VALUES (?)", ("a",)).lastrowid
    raise ValueError("Delete the line and run it again; update the config with care.")
    sql = "INSERT OR REPLACE INTO t(a) VALUES (?)"
    where = "d.doc_id IN (SELECT doc_id FROM doc_meta WHERE value_text = ? COLLATE NOCASE)"
    fts = conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?")
    return "With --fix, remove orphans", re.compile(r"(?<=[.!?])\\s+|[<=>?@]{2}"), sql, where, node, fts
'''
    found = [(f.line, f.rule) for f in module_findings("m.py", source)]
    assert found == [
        (5, "transaction statement"),
        (7, "INSERT OR IGNORE/REPLACE"),
        (10, "ifnull"),
        (11, "GLOB"),
        (12, "lastrowid"),
        (14, "INSERT OR IGNORE/REPLACE"),
        (15, "COLLATE"),
    ]
