"""The MCP server through fastmcp's in-memory Client: the real protocol, real KBs on disk.

These tests use the FAKE hash embedder (semantics do not matter here: the tools' contracts do);
tests/mcp/test_mcp_model.py runs the real model.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client, FastMCP
from fastmcp.exceptions import ToolError

from conftest import FakeHashEmbedder, doc_ids, make_kb
from pinakes_core import KB, PinakesError
from pinakes_core.models import FrontierItem, LinksResult, Neighbour, UnresolvedLink
from pinakes_core.plugins import plugin_manager
from pinakes_mcp import create_server
from pinakes_mcp.served import ServedKB
from pinakes_mcp.tools import GRAPH_MISSING, MAX_DEPTH, RESULT_BUDGET_TOKENS

pytestmark = pytest.mark.anyio

SNAPSHOT = Path(__file__).with_name("tools.json")
TOOLS = {"pinakes_search", "pinakes_read", "pinakes_links", "pinakes_kbs", "pinakes_recent"}

LONG_SECTIONS = "".join(
    f"## Part {i}\n\n" + " ".join(f"word{i}x{j}" for j in range(120)) + "\n\n" for i in range(30)
)

FILES: dict[str, str | bytes] = {
    "raft.md": (
        "---\ntitle: Raft consensus\ntags: [consensus]\n---\n"
        "# Raft\n\nRaft elects a leader with randomized election timeouts.\n\n"
        "## Log replication\n\nThe leader appends entries and replicates the log to followers. "
        "Reads can use [leader leases](notes/leases.md).\n\n"
        "## Safety\n\nA candidate needs a majority of votes before it becomes leader.\n"
    ),
    "notes/paxos.md": (
        "---\ntags: [consensus]\n---\n# Paxos\n\n"
        "Paxos reaches agreement with proposers, acceptors and learners.\n"
    ),
    "notes/leases.md": "# Leases\n\nA lease lets the leader answer reads until its clock runs out.\n",
    "runbooks/deploy.md": (
        "# Deploy\n\nRun the migration, then roll the pods one by one.\n\n"
        "## Rollback\n\nIf error E-4012 appears, roll back with the previous image tag.\n"
    ),
    "long.md": "# Long\n\n" + LONG_SECTIONS,
}


def structured(result: Any) -> dict[str, Any]:
    data = result.structured_content
    assert isinstance(data, dict)
    return data


async def call(client: Client[Any], tool: str, **args: Any) -> dict[str, Any]:
    return structured(await client.call_tool(tool, args))


async def fails(client: Client[Any], tool: str, **args: Any) -> str:
    result = await client.call_tool(tool, args, raise_on_error=False)
    assert result.is_error, f"{tool}({args}) should have failed"
    return str(result.content[0].text)


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def embedder() -> FakeHashEmbedder:
    return FakeHashEmbedder()


@pytest.fixture
def notes_root(tmp_path: Path) -> Path:
    return make_kb(tmp_path / "notes", FILES, name="notes")


@pytest.fixture
def notes(notes_root: Path, embedder: FakeHashEmbedder) -> KB:
    kb = KB.open(notes_root, embedder=embedder)
    kb.sync()
    return kb


@pytest.fixture
def ids(notes: KB) -> dict[str, str]:
    return doc_ids(notes.root)


@pytest.fixture
async def client(notes: KB) -> AsyncIterator[Client[Any]]:
    async with Client(create_server([notes])) as c:
        yield c


# -- the tool list --------------------------------------------------------------------------


def _tool_listing(tools: list[Any]) -> list[dict[str, Any]]:
    listing = []
    for tool in sorted(tools, key=lambda t: t.name):
        dumped = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
        dumped.pop("_meta", None)  # fastmcp's own bookkeeping, not our contract
        listing.append(dumped)
    return listing


async def test_tool_list_matches_the_snapshot(client: Client[Any]) -> None:
    listing = _tool_listing(await client.list_tools())
    if os.environ.get("PINAKES_UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(json.dumps(listing, indent=2, ensure_ascii=False) + "\n", "utf-8")
    assert listing == json.loads(SNAPSHOT.read_text("utf-8")), (
        "tool schemas changed; if on purpose, rerun with PINAKES_UPDATE_SNAPSHOTS=1 and commit "
        "tests/mcp/tools.json"
    )


async def test_every_tool_is_read_only_bounded_and_documented(client: Client[Any]) -> None:
    tools = {tool.name: tool for tool in await client.list_tools()}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is True
        assert tool.annotations.open_world_hint is False
        assert tool.output_schema is not None, f"{tool.name} has no structured output"
        assert len(tool.description or "") > 200, f"{tool.name} needs an agent-facing docstring"
    search = tools["pinakes_search"].input_schema["properties"]
    assert (search["k"]["minimum"], search["k"]["maximum"], search["k"]["default"]) == (1, 50, 8)
    assert search["query"]["maxLength"] == 2000
    assert search["tags"]["anyOf"][0]["maxItems"] == 20
    read = tools["pinakes_read"].input_schema["properties"]
    assert (read["max_tokens"]["default"], read["max_tokens"]["maximum"]) == (4000, 20000)
    links = tools["pinakes_links"].input_schema["properties"]
    assert links["depth"]["default"] == 1
    assert links["direction"]["enum"] == ["out", "in", "both"]
    assert "prefer refining the query over raising `k`" in " ".join(
        (tools["pinakes_search"].description or "").split()
    )
    assert "take one hop" in (tools["pinakes_links"].description or "")


# -- pinakes_search -------------------------------------------------------------------------


async def test_search_returns_core_json_plus_frontier(
    client: Client[Any], ids: dict[str, str]
) -> None:
    result = await call(client, "pinakes_search", query="randomized election timeouts", k=1)
    assert set(result) == {
        "query",
        "hits",
        "confidence",
        "abstain",
        "timings_ms",
        "frontier",
        "truncated",
        "notes",
    }
    assert result["truncated"] is False and result["notes"] == []
    (hit,) = result["hits"]
    assert hit["path"] == "raft.md" and hit["doc_id"] == ids["raft.md"]
    assert "kb" not in hit, "one served KB: hits do not name it"
    assert {"doc_id", "chunk", "title", "heading_path", "text", "score", "lines", "ranks"} <= set(
        hit
    )
    assert result["frontier"] == [
        {
            "doc_id": ids["notes/leases.md"],
            "title": "Leases",
            "rel": "links-to",
            "kb": "notes",
            "via": ids["raft.md"],
        }
    ]
    assert result["timings_ms"]["server_total"] >= result["timings_ms"]["total"]


async def test_search_filters_pass_through(client: Client[Any]) -> None:
    by_tag = await call(client, "pinakes_search", query="leader paxos", tags=["consensus"], k=20)
    assert {h["path"] for h in by_tag["hits"]} == {"raft.md", "notes/paxos.md"}
    by_path = await call(client, "pinakes_search", query="leader paxos", path="notes/", k=20)
    assert {h["path"] for h in by_path["hits"]} == {"notes/paxos.md", "notes/leases.md"}
    exact = await call(client, "pinakes_search", query="roll back", entities=["E-4012"], k=1)
    assert exact["hits"][0]["path"] == "runbooks/deploy.md"


async def test_search_caps_the_reply_by_tokens(tmp_path: Path, embedder: FakeHashEmbedder) -> None:
    files: dict[str, str | bytes] = {
        # Distinct texts (identical ones would be folded into one hit as duplicates).
        f"d{i:02d}.md": "# Doc {i}\n\n{text}\n".format(
            i=i, text=" ".join(f"alpha{j} beta{j % 7} doc{i}w{j}" for j in range(90))
        )
        for i in range(60)
    }
    kb = KB.open(make_kb(tmp_path / "big", files, name="big"), embedder=embedder)
    async with Client(create_server([kb])) as client:
        result = await call(client, "pinakes_search", query="alpha3 beta2", k=50)
    assert result["truncated"] is True
    assert 1 <= len(result["hits"]) < 50
    compact = json.dumps(result["hits"], separators=(",", ":"), ensure_ascii=False)
    assert len(compact) / 4 <= RESULT_BUDGET_TOKENS
    assert "refine the query" in result["notes"][0]


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        ({"query": "x", "k": 0}, "'k' must be an integer from 1 to 50; got 0."),
        ({"query": "x", "k": 10_000}, "'k' must be an integer from 1 to 50; got 10000."),
        ({"query": "x", "k": 51}, "must be an integer from 1 to 50"),
        ({"query": "x" * 2_001}, "'query' must be a string of 0 to 2000 characters"),
        ({"query": "x", "tags": [f"t{i}" for i in range(21)]}, "a list of at most 20 items"),
        ({"query": "x", "entities": [""]}, "'entities[0]' must be a string of 1 to 200 characters"),
        ({"query": "x", "explain": True}, "there is no argument 'explain'"),
        ({"query": "x", "kb": "nope"}, "No served KB is called 'nope'. Served KBs: notes"),
        ({"query": "x", "path": "../"}, "not a KB-relative folder"),
        ({"query": "x", "path": "/etc"}, "not a KB-relative folder"),
        ({}, "the argument 'query' is required"),
    ],
)
async def test_search_rejects_bad_arguments(
    client: Client[Any], args: dict[str, Any], complaint: str
) -> None:
    assert complaint in await fails(client, "pinakes_search", **args)


async def test_any_query_text_is_safe(client: Client[Any]) -> None:
    for query in ['"', "NEAR(", "*", "-", "^", "🙂", "", "x" * 2_000]:
        result = await call(client, "pinakes_search", query=query)
        assert isinstance(result["hits"], list)


async def test_unexpected_errors_are_masked(
    client: Client[Any], notes: KB, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("secret detail /home/someone")

    monkeypatch.setattr(notes, "search", broken)
    message = await fails(client, "pinakes_search", query="leader")
    assert "secret" not in message and "pinakes_search" in message


def test_a_bug_in_the_warm_up_search_leaves_the_kb_ready(
    notes: KB, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("secret detail /home/someone")

    monkeypatch.setattr(notes, "search", broken)
    served = ServedKB(notes)
    served.warm(threading.Lock())  # no exception escapes the warm-up thread
    assert served.ready.is_set() and served.error is None
    assert "warm-up failed (RuntimeError)" in caplog.text and "secret" not in caplog.text


# -- several KBs ----------------------------------------------------------------------------


@pytest.fixture
def two_kbs(tmp_path: Path, notes: KB, embedder: FakeHashEmbedder) -> list[KB]:
    other = make_kb(
        tmp_path / "ops",
        {
            "leader.md": "# Leader on call\n\nThe on-call leader pages the team when the leader node dies.\n",
            "runbooks/deploy.md": "# Deploy (ops)\n\nShip on Tuesdays, and a leader approves.\n",
        },
        name="ops",
    )
    ops = KB.open(other, embedder=embedder)
    ops.sync()
    return [notes, ops]


async def test_search_all_kbs_merges_by_score_and_names_the_kb(two_kbs: list[KB]) -> None:
    async with Client(create_server(two_kbs)) as client:
        merged = await call(client, "pinakes_search", query="leader", k=6)
        only_ops = await call(client, "pinakes_search", query="leader", kb="ops", k=6)
        only_notes = await call(client, "pinakes_search", query="leader", kb="notes", k=6)
    kbs = [hit["kb"] for hit in merged["hits"]]
    assert set(kbs) == {"notes", "ops"}
    # Scores are comparable across KBs: the merge is the union's best six by score.
    scores = [hit["score"] for hit in merged["hits"]]
    assert scores == sorted(scores, reverse=True)
    union = sorted(
        [h["score"] for h in only_ops["hits"]] + [h["score"] for h in only_notes["hits"]],
        reverse=True,
    )
    assert scores == union[:6]
    assert set(merged["timings_ms"]) >= {"kb:notes", "kb:ops", "frontier", "server_total"}
    assert {hit["kb"] for hit in only_ops["hits"]} == {"ops"}
    ops_paths = [hit["path"] for hit in only_ops["hits"]]
    assert [h["path"] for h in merged["hits"] if h["kb"] == "ops"] == ops_paths[: kbs.count("ops")]


async def test_documents_resolve_across_kbs(two_kbs: list[KB]) -> None:
    ops = two_kbs[1]
    ops_ids = doc_ids(ops.root)
    async with Client(create_server(two_kbs)) as client:
        by_id = await call(client, "pinakes_read", doc=ops_ids["leader.md"])
        by_name_uri = await call(client, "pinakes_read", doc=f"pnk://ops/{ops_ids['leader.md']}")
        by_id_uri = await call(
            client, "pinakes_read", doc=f"pnk://{ops.config.kb.id}/{ops_ids['leader.md']}"
        )
        ambiguous = await fails(client, "pinakes_read", doc="runbooks/deploy.md")
        picked = await call(client, "pinakes_read", doc="runbooks/deploy.md", kb="ops")
        clash = await fails(
            client, "pinakes_read", doc=f"pnk://ops/{ops_ids['leader.md']}", kb="notes"
        )
    assert by_id["kb"] == by_name_uri["kb"] == by_id_uri["kb"] == "ops"
    assert by_id["title"] == "Leader on call"
    assert "several KBs (notes, ops)" in ambiguous and "kb=" in ambiguous
    assert picked["title"] == "Deploy (ops)"
    assert "names KB 'ops' but kb='notes'" in clash


def test_duplicate_kb_names_are_a_startup_error(tmp_path: Path, embedder: FakeHashEmbedder) -> None:
    first = KB.open(make_kb(tmp_path / "a", name="same"), embedder=embedder)
    second = KB.open(make_kb(tmp_path / "b", name="same"), embedder=embedder)
    with pytest.raises(PinakesError, match="same name 'same'"):
        create_server([first, second])
    with pytest.raises(PinakesError, match="No KB to serve"):
        create_server([])


# -- pinakes_read ---------------------------------------------------------------------------


async def test_read_by_id_uri_and_path(client: Client[Any], notes: KB, ids: dict[str, str]) -> None:
    raft = ids["raft.md"]
    by_id = await call(client, "pinakes_read", doc=raft)
    assert by_id["text"] == (notes.root / "raft.md").read_text("utf-8")
    assert by_id["truncated"] is False and by_id["section"] is None
    assert by_id["kb"] == "notes" and by_id["title"] == "Raft consensus"
    assert by_id["tags"] == ["consensus"]
    assert by_id["headings"] == ["Raft", "Raft › Log replication", "Raft › Safety"]
    assert by_id["links"][0]["dst_doc"] == ids["notes/leases.md"]
    assert by_id["tokens"] == by_id["total_tokens"] == -(-len(by_id["text"]) // 4)
    for ref in (raft.lower(), f"pnk://{raft}", by_id["uri"], "raft.md", "./raft.md"):
        assert (await call(client, "pinakes_read", doc=ref))["doc_id"] == raft


async def test_read_one_section(client: Client[Any]) -> None:
    part = await call(client, "pinakes_read", doc="raft.md", section="log replication")
    assert part["section"] == "Raft › Log replication"
    assert part["text"].startswith("## Log replication\n") and "Safety" not in part["text"]
    by_path = await call(client, "pinakes_read", doc="raft.md", section="Raft > Safety")
    assert by_path["text"].startswith("## Safety")
    missing = await fails(client, "pinakes_read", doc="raft.md", section="Nope")
    assert "no heading 'Nope'" in missing and "'Log replication'" in missing


async def test_read_caps_long_documents(client: Client[Any]) -> None:
    capped = await call(client, "pinakes_read", doc="long.md", max_tokens=500)
    assert capped["truncated"] is True
    assert capped["tokens"] <= 500 < capped["total_tokens"]
    assert capped["text"].endswith("\n") and " word" not in capped["text"][-2:]
    default = await call(client, "pinakes_read", doc="long.md")
    assert default["truncated"] is (default["total_tokens"] > 4000)
    assert default["tokens"] <= 4000


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        ({"doc": "../../etc/passwd"}, "climbs out of the KB"),
        ({"doc": "notes/../../outside.md"}, "climbs out of the KB"),
        ({"doc": "..\\..\\windows\\win.ini"}, "climbs out of the KB"),
        ({"doc": "/etc/passwd"}, "absolute path"),
        ({"doc": "C:\\Windows\\win.ini"}, "absolute path"),
        ({"doc": "~/secret.md"}, "absolute path"),
        ({"doc": "file:///etc/passwd"}, "not a pnk:// URI"),
        (
            {"doc": "pnk://elsewhere/01JAXR3T5W6Z8Q9N0P1R2S3T4V"},
            "No served KB is called 'elsewhere'",
        ),
        ({"doc": "pnk://not-a-ulid"}, "not a document ULID"),
        ({"doc": "01JAXR3T5W6Z8Q9N0P1R2S3T4V"}, "No document '01JAXR3T5W6Z8Q9N0P1R2S3T4V'"),
        ({"doc": "missing.md"}, "No document 'missing.md' in KB 'notes'"),
        ({"doc": "raft.md", "kb": "nope"}, "No served KB is called 'nope'"),
        ({"doc": ""}, "'doc' must be a string of 1 to 1000 characters"),
        ({"doc": "raft.md", "max_tokens": 20_001}, "an integer from 100 to 20000; got 20001"),
        ({"doc": "raft.md", "max_tokens": 0}, "an integer from 100 to 20000; got 0"),
    ],
)
async def test_read_rejects_bad_references(
    client: Client[Any], args: dict[str, Any], complaint: str
) -> None:
    assert complaint in await fails(client, "pinakes_read", **args)


async def test_read_refuses_symlinks_out_of_the_root(
    client: Client[Any], notes: KB, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\ntop secret\n", "utf-8")
    (notes.root / "escape.md").symlink_to(outside / "secret.md")
    (notes.root / "escdir").symlink_to(outside, target_is_directory=True)
    for ref in ("escape.md", "escdir/secret.md"):
        message = await fails(client, "pinakes_read", doc=ref)
        assert "leads outside the KB 'notes'" in message
        assert "top secret" not in message


async def test_read_refuses_an_indexed_file_swapped_for_a_symlink(
    client: Client[Any], notes: KB, ids: dict[str, str], tmp_path: Path
) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("top secret\n", "utf-8")
    target = notes.root / "notes" / "paxos.md"
    target.unlink()
    target.symlink_to(secret)
    message = await fails(client, "pinakes_read", doc=ids["notes/paxos.md"])
    assert "now leads outside the KB" in message and "top secret" not in message


# -- the document resource ------------------------------------------------------------------


async def test_documents_are_resources(client: Client[Any], notes: KB, ids: dict[str, str]) -> None:
    templates = await client.list_resource_templates()
    assert [t.uri_template for t in templates] == ["pnk://{kb}/{doc_id}"]
    raft = ids["raft.md"]
    expected = (notes.root / "raft.md").read_text("utf-8")
    for uri in (f"pnk://notes/{raft}", f"pnk://{notes.config.kb.id}/{raft}"):
        (content,) = await client.read_resource(uri)
        assert content.text == expected
    with pytest.raises(Exception, match="No document"):
        await client.read_resource("pnk://notes/01JAXR3T5W6Z8Q9N0P1R2S3T4V")
    with pytest.raises(Exception, match="No served KB is called 'other'"):
        await client.read_resource(f"pnk://other/{raft}")


# -- pinakes_kbs ----------------------------------------------------------------------------


async def test_kbs_lists_counts_model_and_capabilities(client: Client[Any], notes: KB) -> None:
    (info,) = (await call(client, "pinakes_kbs"))["kbs"]
    assert info["name"] == "notes" and info["kb_id"] == notes.config.kb.id
    assert (info["documents"], info["synced"], info["model"]) == (5, True, "fake-hash-v1")
    assert info["chunks"] >= 5 and info["last_sync"] > 0
    assert info["stale"] == {"new": 0, "changed": 0, "removed": 0}
    assert info["graph"] is graph_plugin_answers() and info["watching"] is False


# -- pinakes_links --------------------------------------------------------------------------


def graph_plugin_answers() -> bool:
    """Whether KB.links is answered by an installed plugin (not just declared by core)."""
    if not hasattr(KB, "links"):
        return False
    hook = getattr(plugin_manager().hook, "kb_links", None)
    return hook is None or bool(hook.get_hookimpls())


class FakeGraphKB(KB):
    """A FAKE KB with a links API: records each call and answers with a fixed neighbourhood."""

    fan_out = 1

    def links(
        self,
        doc: str,
        *,
        rel: str | None = None,
        direction: str = "both",
        depth: int = 1,
        query: str | None = None,
    ) -> LinksResult:
        self.calls = [*getattr(self, "calls", []), (doc, rel, direction, depth, query)]
        return LinksResult(
            doc_id=doc,
            title="Raft consensus",
            rel=rel,
            depth=depth,
            depth_asked=depth,
            neighbours=[
                Neighbour(
                    doc_id=f"01JAXR3T5W6Z8Q9N0P1R2S{i:04d}",
                    title=f"Neighbour {i} " + "x" * 200,
                    path=f"n{i}.md",
                    rel="links-to",
                    direction="out",
                    distance=1,
                    score=1.0,
                )
                for i in range(self.fan_out)
            ],
            frontier=[
                FrontierItem(doc_id="01JAXR3T5W6Z8Q9N0P1R2S9999", rel="links-to", reason="depth")
            ],
            unresolved=[UnresolvedLink(target="gone.md", reason="no such document")],
            confidence=None,
            truncated=False,
        )


@pytest.fixture
def graph_kb(notes: KB, embedder: FakeHashEmbedder) -> FakeGraphKB:
    return FakeGraphKB.open(notes.root, embedder=embedder)


async def test_links_passes_arguments_and_returns_the_design_shape(
    graph_kb: FakeGraphKB, ids: dict[str, str]
) -> None:
    async with Client(create_server([graph_kb])) as client:
        result = await call(
            client, "pinakes_links", doc="raft.md", rel="cites", direction="out", query="leases"
        )
    assert graph_kb.calls == [(ids["raft.md"], "cites", "out", 1, "leases")]
    assert result["kb"] == "notes" and result["doc_id"] == ids["raft.md"]
    assert result["neighbours"][0]["distance"] == 1
    assert result["frontier"] == [
        {
            "doc_id": "01JAXR3T5W6Z8Q9N0P1R2S9999",
            "rel": "links-to",
            "reason": "depth",
            "path": "",  # the fake graph gives none
            "kb": None,
        }
    ]
    assert result["unresolved"] == [{"target": "gone.md", "reason": "no such document"}]
    assert (result["confidence"], result["truncated"]) == (None, False)
    assert (result["depth_asked"], result["depth"], result["notes"]) == (1, 1, [])


async def test_links_serves_at_most_depth_three_and_says_so(graph_kb: FakeGraphKB) -> None:
    async with Client(create_server([graph_kb])) as client:
        result = await call(client, "pinakes_links", doc="raft.md", depth=99)
        too_deep = await fails(client, "pinakes_links", doc="raft.md", depth=101)
        zero = await fails(client, "pinakes_links", doc="raft.md", depth=0)
        bad_direction = await fails(client, "pinakes_links", doc="raft.md", direction="up")
        traversal = await fails(client, "pinakes_links", doc="../../etc/passwd")
        unknown = await fails(client, "pinakes_links", doc="raft.md", kb="nope")
    assert graph_kb.calls[0][3] == MAX_DEPTH == 3
    assert (result["depth_asked"], result["depth"]) == (99, 3)
    assert result["notes"] == ["depth 99 was asked; depth 3 is served (the cap)."]
    assert "'depth' must be an integer from 1 to 100; got 101." in too_deep
    assert "'depth' must be an integer from 1 to 100; got 0." in zero
    assert "'direction' must be one of 'out', 'in', 'both'; got 'up'." in bad_direction
    assert "climbs out of the KB" in traversal
    assert "No served KB is called 'nope'" in unknown


async def test_links_caps_the_reply_by_tokens(graph_kb: FakeGraphKB) -> None:
    graph_kb.fan_out = 500
    async with Client(create_server([graph_kb])) as client:
        result = await call(client, "pinakes_links", doc="raft.md")
    assert result["truncated"] is True
    assert 1 <= len(result["neighbours"]) < 500
    assert "more neighbours did not fit" in result["notes"][-1]
    compact = json.dumps(result, separators=(",", ":"), ensure_ascii=False)
    assert len(compact) / 4 <= RESULT_BUDGET_TOKENS


class NoLinksKB:
    """A FAKE KB object without a links attribute (a core from before the links API)."""

    def __init__(self, kb: KB) -> None:
        self._kb = kb

    def __getattr__(self, name: str) -> Any:
        if name == "links":
            raise AttributeError(name)
        return getattr(self._kb, name)


async def test_links_without_a_links_api_says_how_to_install_the_plugin(notes: KB) -> None:
    async with Client(create_server([NoLinksKB(notes)])) as client:  # type: ignore[list-item]
        with pytest.raises(ToolError, match="uv pip install pinakes-graph") as error:
            await client.call_tool("pinakes_links", {"doc": "raft.md"})
        (info,) = (await call(client, "pinakes_kbs"))["kbs"]
    assert str(error.value) == GRAPH_MISSING
    assert info["graph"] is False


@pytest.mark.skipif(graph_plugin_answers(), reason="the graph plugin is installed here")
async def test_links_with_core_but_no_plugin_is_a_clean_error(client: Client[Any]) -> None:
    with pytest.raises(ToolError, match="pinakes-graph"):
        await client.call_tool("pinakes_links", {"doc": "raft.md"})


@pytest.mark.skipif(not graph_plugin_answers(), reason="needs KB.links from pinakes-graph")
async def test_links_with_the_real_graph_plugin(client: Client[Any], ids: dict[str, str]) -> None:
    result = await call(client, "pinakes_links", doc="raft.md", direction="out")
    assert ids["notes/leases.md"] in {n["doc_id"] for n in result["neighbours"]}
    assert (result["depth"], result["kb"]) == (1, "notes")
    deep = await call(client, "pinakes_links", doc="raft.md", depth=99)
    assert (deep["depth_asked"], deep["depth"]) == (99, 3)
    (info,) = (await call(client, "pinakes_kbs"))["kbs"]
    assert info["graph"] is True


# -- freshness ------------------------------------------------------------------------------

ZOO = {"zoo.md": "# Zebras\n\nZebra stripes confuse biting flies.\n"}


def _paths(result: dict[str, Any]) -> list[str]:
    return [hit["path"] for hit in result["hits"]]


async def test_search_sees_an_external_sync_without_restart(
    client: Client[Any], notes: KB, embedder: FakeHashEmbedder
) -> None:
    before = await call(client, "pinakes_search", query="zebra stripes biting flies", k=3)
    assert "zoo.md" not in _paths(before)
    (notes.root / "zoo.md").write_text(ZOO["zoo.md"], "utf-8")
    with KB.open(notes.root, embedder=embedder) as other_process:
        other_process.sync()
    after = await call(client, "pinakes_search", query="zebra stripes biting flies", k=3)
    assert _paths(after)[0] == "zoo.md"
    assert after["hits"][0]["ranks"]["dense"] is not None, "the vector matrix was reloaded"
    info = (await call(client, "pinakes_kbs"))["kbs"][0]
    assert info["documents"] == 6


async def test_search_survives_a_rebuild_by_another_process(
    client: Client[Any], notes: KB, embedder: FakeHashEmbedder
) -> None:
    await call(client, "pinakes_search", query="leader")
    (notes.root / "zoo.md").write_text(ZOO["zoo.md"], "utf-8")
    with KB.open(notes.root, embedder=embedder) as other_process:
        other_process.sync(rebuild=True)  # deletes and recreates the store file
    after = await call(client, "pinakes_search", query="zebra stripes biting flies", k=3)
    assert _paths(after)[0] == "zoo.md"
    assert after["hits"][0]["ranks"]["dense"] is not None


async def test_watch_syncs_when_files_change(notes: KB) -> None:
    server: FastMCP[Any] = create_server([notes], watch=True, debounce_ms=100)
    async with Client(server) as client:
        assert (await call(client, "pinakes_kbs"))["kbs"][0]["watching"] is True
        (notes.root / "zoo.md").write_text(ZOO["zoo.md"], "utf-8")
        deadline = time.monotonic() + 20
        while True:
            result = await call(client, "pinakes_search", query="zebra stripes biting flies", k=3)
            if _paths(result)[:1] == ["zoo.md"] or time.monotonic() > deadline:
                break
            import anyio

            await anyio.sleep(0.2)
    assert _paths(result)[0] == "zoo.md", "the watcher should have synced the new file"
    assert result["hits"][0]["ranks"]["dense"] is not None
