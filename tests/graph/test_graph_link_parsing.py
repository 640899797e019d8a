"""Link extraction edge cases and end-to-end resolution at sync (DESIGN §2, §6)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pinakes_graph")

from conftest import FakeHashEmbedder, db, doc_ids, make_kb
from pinakes_core import KB
from pinakes_core.read.links import IN_NOTE, TextLink, extract_links, read_text


def targets(text: str) -> list[str]:
    return [link.target for link in extract_links(text, markdown=True)]


@pytest.mark.parametrize(
    "text",
    [
        "`[[code]]` and `[a](code.md)`",
        "```\n[[fenced]]\n[a](f.md)\n```",
        "~~~python\n[[tilde]]\n~~~",
        "    [[indented]] [a](indented.md)",
        r"\[\[escaped\]\]",
        "[x](https://example.com/a.md) <https://example.com> [m](mailto:x@y.z)",
        "![img](picture.md) ![alt](https://e.com/p.png)",
        "[only an anchor](#local)",
        "[a search on this page](?q=search+term) [again](?q=a#b)",
        "[full size](../assets/shot.PNG) [clip](media/demo.mp4) [get it](dist/kit.tar.gz)",
        "[rss]: <{{% eturl rss %}}>\n\n[rss] [home]({{ site.BaseURL }}/x/) [j]({% link a.md %})",
        "[[shot.png]] [[assets/demo.MP4|the demo]] [[kit.tar.gz#x]]",
        '[[<% tp.date.yesterday("YYYY-MM-DD") %>]] [[{{date:YYYY-MM-DD}}|today]]',
    ],
)
def test_not_links(text: str) -> None:
    assert extract_links(text, markdown=True) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[a](my%20note.md)", [TextLink("my%20note.md", "markdown")]),
        ("[a](<my note.md>)", [TextLink("my%20note.md", "markdown")]),
        ("[a](a.md#sec)", [TextLink("a.md#sec", "markdown")]),
        ("[[a#sec]]", [TextLink("a#sec", "wiki")]),
        ("[[label|target]]", [TextLink("label|target", "wiki")]),
        ("[r](/dir/a.md)", [TextLink("/dir/a.md", "markdown")]),
        ("[h](b.html)", [TextLink("b.html", "markdown")]),
        ("[x][ref]\n\n[ref]: refd.md", [TextLink("refd.md", "markdown")]),
        (
            "| a | b |\n|---|---|\n| [[t1]] | [l](t2.md) |",
            [TextLink("t1", "wiki"), TextLink("t2.md", "markdown")],
        ),
        ("Text [[my note]] more.", [TextLink("my note", "wiki")]),
        # Names with a dot that are no media files stay links (a PDF may be a document).
        (
            "[[Node.js]] [[paper.pdf]] [[v1.2 notes]]",
            [
                TextLink("Node.js", "wiki"),
                TextLink("paper.pdf", "wiki"),
                TextLink("v1.2 notes", "wiki"),
            ],
        ),
    ],
)
def test_links_found(text: str, expected: list[TextLink]) -> None:
    assert extract_links(text, markdown=True) == expected


def test_plain_text_documents_have_no_links() -> None:
    assert extract_links("[[a]] [b](b.md)", markdown=False) == []


def test_image_embed_is_not_a_link() -> None:
    assert targets("![[diagram.png]]") == []


# -- end-to-end resolution ----------------------------------------------------------------

RESOLVE_KB = {
    "dir/a.md": "---\naliases: [alpha-alias]\n---\n# Alpha Doc\n\n## Sec\n\nA.\n",
    "my note.md": "# Spaced\n\nspaces in the name.\n",
    "target.md": "# Target\n\nt.\n",
    "label.md": "# Label Page\n\nAlso a document called label.\n",
    "site/page.md": "# Page\n\np.\n",
    "notes/src.md": (
        "# Source\n\n"
        "1 [sp](../my%20note.md)\n"  # resolves
        "2 [sp](<../my note.md>)\n"  # same raw target as 1 after parsing: stored once
        "3 [an](../dir/a.md#sec)\n"  # resolves
        "4 [[Alpha Doc#Sec]]\n"  # resolves by title
        "5 [[lbl text|target]]\n"  # Dendron order: resolves to target.md
        "6 [[target|some label]]\n"  # Obsidian order: resolves to target.md
        "7 [root](/dir/a.md)\n"  # root-relative: resolves
        "8 [html](../site/page.html)\n"  # .html → .md: resolves
        "9 [[alpha-alias]]\n"  # alias: resolves
        "10 [gone](missing.md)\n"  # unresolved
        "11 [[Nowhere At All]]\n"  # unresolved
        "12 [out](../../outside.md)\n"  # unresolved: outside the KB
        "13 [ext](https://example.com/x.md) ![im](../target.md) `[[code]]`\n"  # not links
    ),
}
RESOLVED_BY_HAND = {
    "../my%20note.md": "my note.md",
    "../dir/a.md#sec": "dir/a.md",
    "Alpha Doc#Sec": "dir/a.md",
    "lbl text|target": "target.md",
    "target|some label": "target.md",
    "/dir/a.md": "dir/a.md",
    "../site/page.html": "site/page.md",
    "alpha-alias": "dir/a.md",
}
UNRESOLVED_BY_HAND = {"missing.md", "Nowhere At All", "../../outside.md"}


@pytest.fixture
def resolved(tmp_path: Path) -> tuple[Path, KB]:
    root = make_kb(tmp_path / "kb", RESOLVE_KB)
    kb = KB.open(root, embedder=FakeHashEmbedder())
    kb.sync()
    yield root, kb
    kb.close()


def _synced(tmp_path: Path, files: dict[str, str]) -> Path:
    """A KB of ``files`` under ``tmp_path``, synced (its links resolved)."""
    root = make_kb(tmp_path / "kb", files)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
    return root


def _link_rows(root: Path, src: str) -> list[tuple[str, str | None, str | None]]:
    conn = db(root)
    try:
        return [
            (r[0], r[1], r[2])
            for r in conn.execute(
                "SELECT l.target, d.path, l.reason FROM links l JOIN documents s ON s.doc_id = l.src_doc "
                "LEFT JOIN documents d ON d.doc_id = l.dst_doc WHERE s.path = ? ORDER BY l.rowid",
                (src,),
            )
        ]
    finally:
        conn.close()


def test_every_link_resolves_as_counted_by_hand(resolved: tuple[Path, KB]) -> None:
    root, _ = resolved
    rows = _link_rows(root, "notes/src.md")
    # Link 1 and 2 are the same raw target after parsing and are stored once.
    assert {t for t, _, _ in rows} == set(RESOLVED_BY_HAND) | UNRESOLVED_BY_HAND
    assert len(rows) == len(RESOLVED_BY_HAND) + len(UNRESOLVED_BY_HAND)
    for target, path, reason in rows:
        if target in RESOLVED_BY_HAND:
            assert (path, reason) == (RESOLVED_BY_HAND[target], None), target
        else:
            assert path is None and reason, target


def test_share_resolved_matches_an_independent_count(resolved: tuple[Path, KB]) -> None:
    root, _ = resolved
    conn = db(root)
    try:
        total, ok = conn.execute("SELECT COUNT(*), SUM(reason IS NULL) FROM links").fetchone()
    finally:
        conn.close()
    assert (ok, total) == (8, 11)
    assert ok / total == pytest.approx(8 / 11)


def test_unresolved_links_carry_reasons_in_links_and_doctor(resolved: tuple[Path, KB]) -> None:
    _, kb = resolved
    unresolved = {u.target: u.reason for u in kb.links("notes/src.md").unresolved}
    assert set(unresolved) == UNRESOLVED_BY_HAND
    assert "missing.md" in unresolved["missing.md"]
    assert "Nowhere At All" in unresolved["Nowhere At All"]
    assert "outside the KB" in unresolved["../../outside.md"]
    finding = next(f for f in kb.doctor().findings if f.check == "dangling-links")
    assert finding.message.startswith("3 of 11 links")
    assert len(finding.items) == 3
    assert all(item.startswith("notes/src.md: ") for item in finding.items)


def test_resolved_links_become_reverse_scan_edges(resolved: tuple[Path, KB]) -> None:
    root, _ = resolved
    ids = doc_ids(root)
    conn = db(root)
    try:
        dsts = {
            r[0]
            for r in conn.execute(
                "SELECT d.key FROM edges e JOIN nodes s ON s.node_id = e.src "
                "JOIN nodes d ON d.node_id = e.dst WHERE e.kind = 'reverse-scan' AND s.key = ?",
                (ids["notes/src.md"],),
            )
        }
    finally:
        conn.close()
    assert dsts == {ids[p] for p in set(RESOLVED_BY_HAND.values())}


def test_wikilink_prefers_the_document_in_the_linking_folder(tmp_path: Path) -> None:
    root = make_kb(
        tmp_path / "kb",
        {"x/dup.md": "# D1\n", "y/dup.md": "# D2\n", "y/src.md": "# S\n\n[[dup]]\n"},
    )
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
    assert _link_rows(root, "y/src.md") == [("dup", "y/dup.md", None)]


def test_links_into_the_same_note_are_neither_documents_nor_dangling(tmp_path: Path) -> None:
    # Obsidian: [[#Heading]], [[#^block]], [[#Heading|label]]; Dendron: [[label|#Heading]], and
    # its tag form [[#tag|tags.x]], which does name a document.
    text = (
        "# Src\n\n## Heading\n\nSee [[#Heading]], [[#^blk]], [[#Heading|an external link]] "
        "and [[the heading|#Heading]]; tagged [[#x|tags.x]].\n"
    )
    root = make_kb(tmp_path / "kb", {"src.md": text, "tags.x.md": "# x\n"})
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        assert kb.links("src.md").unresolved == []
        assert all(f.check != "dangling-links" for f in kb.doctor().findings)
    assert _link_rows(root, "src.md") == [
        ("#Heading", None, IN_NOTE),
        ("#^blk", None, IN_NOTE),
        ("#Heading|an external link", None, IN_NOTE),
        ("the heading|#Heading", None, IN_NOTE),
        ("#x|tags.x", "tags.x.md", None),
    ]


def test_a_wikilink_label_that_names_another_note_is_still_a_label(tmp_path: Path) -> None:
    # Obsidian writes [[target|label]], Dendron [[label|target]]: the part naming a file wins
    # over one matching only a title, the left one at equal strength; [[#h|label]] stays here.
    text = (
        "# Src\n\n## Property\n\nUse [[Plugins/Templates|Templates]], [[#property|properties]] "
        "and [[Convert Link|dendron.commands.convert-link]]; tagged [[#x|tags.x]], "
        "[[Tags|dendron://site/dendron.topic.tags]].\n"
    )
    root = _synced(
        tmp_path,
        {
            "src.md": text,
            "Plugins/Templates.md": "# Templates plugin\n",
            "Clipper/Templates.md": "# Clipper templates\n",  # first by path
            "Properties.md": "# Properties\n",
            "howto.md": "# Convert Link\n",  # the label is this note's title, not a file name
            "dendron.commands.convert-link.md": "# Convert link command\n",
            "tags.x.md": "# x\n",
            "tags.md": "# Tags\n",  # a file named like the label: the dotted name is the target
            "dendron.topic.tags.md": "# Tags topic\n",
        },
    )
    assert _link_rows(root, "src.md") == [
        ("Plugins/Templates|Templates", "Plugins/Templates.md", None),
        ("#property|properties", None, IN_NOTE),
        ("Convert Link|dendron.commands.convert-link", "dendron.commands.convert-link.md", None),
        ("#x|tags.x", "tags.x.md", None),
        ("Tags|dendron://site/dendron.topic.tags", "dendron.topic.tags.md", None),
    ]


def test_a_path_naming_nothing_from_its_folder_is_tried_from_the_root(tmp_path: Path) -> None:
    # An MkDocs blog post's frontmatter links: name pages from the docs root; so do hand-written
    # links. The linking folder still wins, and "./" or "../" never leaves it for the root.
    post = (
        "---\nlinks:\n  - setup/blog.md\n  - posts/other.md#sec\n---\n# Post\n\n"
        "Read [this](setup/blog.md), [that](./setup/blog.md) and [near](notes/n.md).\n"
    )
    root = _synced(
        tmp_path,
        {
            "setup/blog.md": "# Blog setup\n",
            "posts/other.md": "# Other\n",
            "notes/n.md": "# Root notes\n",
            "posts/notes/n.md": "# Notes beside the post\n",
            "posts/post.md": post,
        },
    )
    assert _link_rows(root, "posts/post.md") == [
        ("setup/blog.md", "setup/blog.md", None),
        ("posts/other.md#sec", "posts/other.md", None),
        ("setup/blog.md", "setup/blog.md", None),
        ("./setup/blog.md", None, "no document at posts/setup/blog.md"),
        ("notes/n.md", "posts/notes/n.md", None),
    ]


def test_hugo_sections_and_logseq_namespaces_resolve(tmp_path: Path) -> None:
    # Hugo links a section by its URL ("/hugo-modules/" is hugo-modules/_index.md); Logseq
    # writes the page "Whiteboard/Tool" to pages/Whiteboard___Tool.md and links it by name.
    root = _synced(
        tmp_path,
        {
            "hugo-modules/_index.md": "---\ntitle: Modules\n---\n\nAbout modules.\n",
            "pages/Whiteboard___Tool.md": "- A tool.\n",
            "pages/src.md": "See [modules](/hugo-modules/) and [[Whiteboard/Tool]].\n",
        },
    )
    assert _link_rows(root, "pages/src.md") == [
        ("/hugo-modules/", "hugo-modules/_index.md", None),
        ("Whiteboard/Tool", "pages/Whiteboard___Tool.md", None),
    ]


def test_zola_internal_links_start_from_the_content_folder(tmp_path: Path) -> None:
    # Zola writes "@/blog/_index.md": the path from the site's content/ folder, which is the
    # KB root when the KB is that folder, or a content/ folder inside a whole site repository.
    root = _synced(
        tmp_path,
        {
            "docs/content/blog/_index.md": '+++\ntitle = "Blog"\n+++\nPosts.\n',
            "docs/content/guide/page.md": "A page.\n",
            "docs/content/guide/src.md": (
                "See [blog](@/blog/_index.md), [page](@/guide/page.md#front-matter), "
                "[gone](@/nowhere.md) and [up](@/../x.md).\n"
            ),
        },
    )
    rows = _link_rows(root, "docs/content/guide/src.md")
    assert rows[:2] == [
        ("@/blog/_index.md", "docs/content/blog/_index.md", None),
        ("@/guide/page.md#front-matter", "docs/content/guide/page.md", None),
    ]
    assert rows[2:] == [
        ("@/nowhere.md", None, "no document at nowhere.md in the KB or a content/ folder"),
        ("@/../x.md", None, "../x.md is outside the KB"),
    ]


def test_zola_links_prefer_the_linking_sites_own_content_folder(tmp_path: Path) -> None:
    # Two sites in one KB, both with content/about.md: each site's "@/about.md" is its own
    # page, whatever order the roots were found in (a set's order varies by process).
    root = _synced(
        tmp_path,
        {
            "site-a/content/about.md": "About A.\n",
            "site-b/content/about.md": "About B.\n",
            "site-a/content/x.md": "[about](@/about.md)\n",
            "site-b/content/x.md": "[about](@/about.md)\n",
        },
    )
    for site in ("site-a", "site-b"):
        rows = _link_rows(root, f"{site}/content/x.md")
        assert rows == [("@/about.md", f"{site}/content/about.md", None)]


def test_links_to_the_kb_root_reach_its_folder_page(tmp_path: Path) -> None:
    root = _synced(
        tmp_path,
        {
            "_index.md": "---\ntitle: Home\n---\nThe site.\n",
            "docs/_index.md": "---\ntitle: Docs\n---\nAll docs.\n",
            "docs/a.md": "[home](/) [up](../) [docs](./)\n",
        },
    )
    assert _link_rows(root, "docs/a.md") == [
        ("/", "_index.md", None),
        ("../", "_index.md", None),
        ("./", "docs/_index.md", None),
    ]


def test_a_files_name_wins_over_a_folder_pages_derived_title(tmp_path: Path) -> None:
    # Obsidian's folder note beside its folder (projects.md) keeps [[projects]] although the
    # title-less projects/README.md is now titled "projects"; with no such file the folder
    # page is what the name reaches.
    root = _synced(
        tmp_path,
        {
            "projects.md": "All projects.\n",
            "projects/README.md": "Read me.\n",
            "projects/alpha.md": "Part of [[projects]].\n",
            "areas/README.md": "Areas.\n",
            "areas/home.md": "Part of [[areas]].\n",
        },
    )
    assert _link_rows(root, "projects/alpha.md") == [("projects", "projects.md", None)]
    assert _link_rows(root, "areas/home.md") == [("areas", "areas/README.md", None)]


def test_links_to_a_declared_site_address_reach_the_page_declaring_it(tmp_path: Path) -> None:
    # Jekyll's docs: each page declares "permalink: /docs/<x>/" and links to those addresses,
    # absolute or relative to the linking page's own address.
    root = _synced(
        tmp_path,
        {
            "front-matter.md": "---\npermalink: /docs/front-matter/\n---\nFront matter.\n",
            "installation/ubuntu.md": "---\npermalink: /docs/installation/ubuntu/\n---\nApt.\n",
            "posts.md": "---\npermalink: /:categories/:title/\n---\nA pattern, no page.\n",
            "installation/other-linux.md": (
                "---\npermalink: /docs/installation/other-linux/\n---\n"
                "See [fm](/docs/front-matter/#defaults), [fm again](/docs/front-matter.html), "
                "[ubuntu](../ubuntu/), [gone](/docs/gone/) and [pattern](/:categories/:title/).\n"
            ),
            "plain.md": "No address: [ubuntu](../ubuntu/).\n",
            # No declared address: the site publishes the file at /docs/step-by-step/02-liquid/
            # (the KB's root is /docs/, as the pages above declare).
            "step-by-step/01-setup.md": "Set up.\n",
            "step-by-step/02-liquid.md": (
                "[setup](../01-setup/), [fm](../../front-matter/), [ubuntu](/docs/installation/"
                "ubuntu/#apt) and [self](/docs/step-by-step/02-liquid/)\n"
            ),
        },
    )
    assert [(t, d) for t, d, _ in _link_rows(root, "installation/other-linux.md")] == [
        ("/docs/front-matter/#defaults", "front-matter.md"),
        ("/docs/front-matter.html", "front-matter.md"),
        ("../ubuntu/", "installation/ubuntu.md"),
        ("/docs/gone/", None),
        ("/:categories/:title/", None),
    ]
    assert [(t, d) for t, d, _ in _link_rows(root, "plain.md")] == [("../ubuntu/", None)]
    assert [d for _, d, _ in _link_rows(root, "step-by-step/02-liquid.md")] == [
        "step-by-step/01-setup.md",
        "front-matter.md",
        "installation/ubuntu.md",
        "step-by-step/02-liquid.md",
    ]


def test_docusaurus_routes_by_id_and_slug_reach_the_page_of_the_same_version(
    tmp_path: Path,
) -> None:
    # Jest's docs (trial 8): pages are named by frontmatter id or slug, not by file, and every
    # version folder repeats them; a page removed from a version is no link to another's.
    links = (
        "[w](watch-plugins) [r](/docs/tutorial-react-native#setup) [t](tutorial-react) "
        "[s](/docs/upgrading) [g](guides/deep) [b](/blog/2016/jest-14) [h](/help)\n"
    )
    version = "website/versioned_docs/version-29.7"
    page = "---\nid: {id}\n---\n# The {id} page\n"
    files = {}
    for folder in ("docs", version):
        files[f"{folder}/Configuration.md"] = "---\nid: configuration\n---\n" + links
        files[f"{folder}/WatchPlugins.md"] = page.format(id="watch-plugins")
        files[f"{folder}/TutorialReactNative.md"] = page.format(id="tutorial-react-native")
        files[f"{folder}/UpgradingToJest30.md"] = "---\nslug: /upgrading\n---\n# Up\n"
        files[f"{folder}/guides/Deep.md"] = "---\nslug: deep\n---\n# Deep\n"
    files[f"{version}/TutorialReact.md"] = page.format(id="tutorial-react")  # gone from docs/
    files["notes/ulid.md"] = (
        "---\nid: 01JAXR3T5W6Z8Q9N0P1R2S3T4V\n---\n[u](01jaxr3t5w6z8q9n0p1r2s3t4v)\n"
    )
    root = _synced(tmp_path, files)
    expected = [
        "WatchPlugins.md",
        "TutorialReactNative.md",
        "TutorialReact.md",
        "UpgradingToJest30.md",
        "guides/Deep.md",
        None,
        None,
    ]
    assert [d for _, d, _ in _link_rows(root, f"{version}/Configuration.md")] == [
        f"{version}/{d}" if d else None for d in expected
    ]
    expected[2] = None  # docs/ has no tutorial-react: the old version's page is not this one's
    assert [d for _, d, _ in _link_rows(root, "docs/Configuration.md")] == [
        f"docs/{d}" if d else None for d in expected
    ]
    # A ULID id is Pinakes' identity, not a route: a link to it resolves as an id (uri).
    assert [d for _, d, _ in _link_rows(root, "notes/ulid.md")] == ["notes/ulid.md"]


def test_a_file_path_out_of_the_kb_is_not_read_as_a_site_address(tmp_path: Path) -> None:
    # A docs folder's page linking its repository's README above the KB: from the page's
    # pretty address (/guide/setup/) the same path would land on the KB's own README.md.
    root = _synced(
        tmp_path,
        {
            "README.md": "# Docs home\n",
            "guide/setup.md": "See [the repository](../../README.md).\n",
        },
    )
    assert _link_rows(root, "guide/setup.md") == [
        ("../../README.md", None, "../README.md is outside the KB")
    ]


def test_wikilinks_to_attachments_and_templates_do_not_dangle(tmp_path: Path) -> None:
    # An Obsidian vault's attachment list and daily-note template (obsidian-hub: 74 of its
    # dangling links were wikilinks to pictures that exist beside the notes).
    root = make_kb(
        tmp_path / "kb",
        {
            "attachments.md": "# Attachments\n\n- [[img/shot.png|shot.png]]\n- [[Daily]]\n",
            "Daily.md": "# Daily\n\n<< [[<% tp.date.yesterday() %>]] | [[{{date}}]] >>\n",
        },
    )
    (root / "img").mkdir()
    (root / "img" / "shot.png").write_bytes(b"\x89PNG")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        assert not [f for f in kb.doctor().findings if f.check == "dangling-links"]
    assert _link_rows(root, "attachments.md") == [("Daily", "Daily.md", None)]
    assert _link_rows(root, "Daily.md") == []


def test_a_store_read_by_older_rules_drops_its_attachment_links(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n\n[[shot.png]] and [[b]]\n", "b.md": "# B\n"})
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
    conn = db(root)
    with conn:  # as the previous release left it: the picture was a dangling link
        conn.execute(
            "INSERT INTO links(src_doc, target, kind, rel, origin, reason) "
            "SELECT doc_id, 'shot.png', 'wiki', 'links-to', 'reverse-scan', ? "
            "FROM documents WHERE path = 'a.md'",
            ("no document named 'shot.png'",),
        )
        conn.execute("UPDATE meta SET value = '6' || substr(value, 2) WHERE key = 'fts_rows'")
    conn.close()
    assert [r[0] for r in _link_rows(root, "a.md")] == ["b", "shot.png"]
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        assert sorted(kb.sync().changed) == ["a.md", "b.md"]
    assert _link_rows(root, "a.md") == [("b", "b.md", None)]


def test_a_store_resolved_by_older_rules_re_resolves_without_a_changed_file(
    tmp_path: Path,
) -> None:
    root = make_kb(tmp_path / "kb", {"src.md": "# Src\n\n## H\n\n[[#H]]\n"})
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
    conn = db(root)
    with conn:  # as the previous release left it
        conn.execute("UPDATE links SET reason = 'no document named '''''")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'links_resolved'")
    conn.close()
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        assert kb.sync().unchanged == 1
    assert _link_rows(root, "src.md") == [("#H", None, IN_NOTE)]


# -- inline tags ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Some #tag and #Project/Alpha here.", ["tag", "Project/Alpha"]),
        ('(#paren), "#quoted" and #tag/ too', ["paren", "quoted", "tag"]),
        ("## Heading #intitle\n\n| a | #cell |\n|---|---|\n| 1 | 2 |", ["intitle", "cell"]),
        ("#y1984 #под-тегом #标签", ["y1984", "под-тегом", "标签"]),
        ("#again and #again", ["again"]),
        ("#हिन्दी #สวัสดี #cafe\u0301", ["हिन्दी", "สวัสดี", "café"]),
        ("#e2e, #b2b and #f0f are tags", ["e2e", "b2b", "f0f"]),
        ("#cafe, #add and #decade; #facade", ["cafe", "add", "decade", "facade"]),
        ("#标签，然后 #tag. #end)", ["标签", "tag", "end"]),
        ("**#bold** and *#em*, then #after\n#next line", ["bold", "em", "after", "next"]),
    ],
)
def test_inline_tags_are_read(text: str, expected: list[str]) -> None:
    assert read_text(text, markdown=True) == ([], expected)


@pytest.mark.parametrize(
    "text",
    [
        "C# and F#, &#39; and issue #1984",
        "`#code` and\n\n```\n#fenced\n```",
        "    #indented code",
        r"\#escaped",
        "[x](a.md#anchor) and http://x.com/#frag and a#b",
        "colours #43B02A, #fff and #ff00aa80, a route #/index",
        "color: #efefef; background-color:#abc, border: 1px solid #cafe",
        """bgcolor="#ddeeff" and backgroundColor: '#efefef' and "#bada55" """,
        "{: #v4-4-1}\n\nText {{< hl color=x id=#x >}} {% tag #y %}",
        "See [[#Open Quick switcher]], [[Note#Heading|#label]] and ![[icon.svg#icon]]",
        "[#label](https://example.com)",
        "**bold**#glued, `code`#glued, [l](u.md)#glued and [[x]]#glued",
        "# A heading\n\n#-/ and #" + "x" * 101,
    ],
)
def test_not_inline_tags(text: str) -> None:
    assert read_text(text, markdown=True)[1] == []


def test_plain_text_documents_have_no_inline_tags() -> None:
    assert read_text("#tag", markdown=False) == ([], [])


def test_an_escaped_hash_starts_no_tag_and_targets_keep_it() -> None:
    links, tags = read_text(r"\#not-a-tag [[C\# notes]] [y](b\#c.md)", markdown=True)
    assert tags == []
    assert links == [TextLink("C# notes", "wiki"), TextLink("b#c.md", "markdown")]


def test_an_anchor_part_hides_no_dangling_link_that_names_a_target(tmp_path: Path) -> None:
    text = "# S\n\n[[Missing#Sec|#label]] and [[ | ]] and [[#H|label]]\n"
    root = make_kb(tmp_path / "kb", {"src.md": text})
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        unresolved = {u.target: u.reason for u in kb.links("src.md").unresolved}
    assert unresolved == {
        "Missing#Sec|#label": "no document named 'Missing'",
        "|": "empty link target",
    }


def test_links_to_the_kbs_own_files_on_its_forge_are_document_links(tmp_path: Path) -> None:
    # A handbook's README links its pages by their GitHub address. In a checkout whose remote is
    # that repository they are links to the KB's documents; other repositories' stay external.
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text(
        '[core]\n\tbare = false\n[remote "origin"]\n\turl = "ssh://git@github.com:22/acme/handbook.git"\n'
        '[submodule "vendor"]\n\turl = https://github.com/other/handbook\n'
    )
    readme = (
        "# Handbook\n\n- [Pay](https://github.com/acme/handbook/blob/main/docs/pay.md#raises)\n"
        "- [Team](https://github.com/acme/handbook/tree/main/docs/team)\n"
        "- [Code](https://github.com/acme/handbook/blob/main/src/app.py)\n"
        "- [Fork](https://github.com/other/handbook/blob/main/docs/pay.md)\n"
        "- [Top](https://github.com/acme/handbook/tree/main/docs/)\n"
        "- [Spaced](https://github.com/acme/handbook/blob/main/docs/new%20hires.md)\n"
    )
    files = {
        "README.md": readme,
        "pay.md": "# Pay\n",
        "team/index.md": "# Team\n",
        "new hires.md": "# New hires\n",
    }
    root = make_kb(repo / "docs", files)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        assert all(f.check != "dangling-links" for f in kb.doctor().findings)
    # (The ssh port is no part of the web address; the submodule's repository is another.)
    assert _link_rows(root, "README.md") == [
        ("/pay.md#raises", "pay.md", None),
        ("/team", "team/index.md", None),
        ("/new hires.md", "new hires.md", None),
    ]
    # The same folder outside any checkout: the addresses are external URLs, as before.
    plain = make_kb(tmp_path / "plain", files)
    with KB.open(plain, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
    assert _link_rows(plain, "README.md") == []


def test_a_broken_checkout_is_no_checkout(tmp_path: Path) -> None:
    # A NUL in a worktree's .git pointer was a ValueError traceback from every `pnk sync`.
    from pinakes_core.read.forge import repository_pages

    (tmp_path / "nul").mkdir()
    (tmp_path / "nul" / ".git").write_bytes(b"gitdir: a\x00b\n")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / ".git").write_bytes(b"gitdir: elsewhere\n")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "commondir").write_bytes(b"\xff\xfe\x00")
    assert repository_pages(tmp_path / "nul") == ()
    assert repository_pages(tmp_path / "bad") == ()
    root = make_kb(
        tmp_path / "nul" / "kb", {"a.md": "# A\n\n[x](https://github.com/a/b/blob/m/a.md)\n"}
    )
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        assert kb.sync().added == ["a.md"]


def test_myst_doc_roles_are_links_to_their_documents(tmp_path: Path) -> None:
    # Jupyter Book and Sphinx pages link a page by {doc}`path` (no suffix, relative to the page
    # or from the root with "/"), optionally with its own text: {doc}`text <path>`.
    page = (
        "# Guide\n\nStart at {doc}`../start/overview`, then {doc}`the setup <setup>` "
        "and {doc}`/start/overview`; {doc}`missing`.\n\n"
        "Write it as `` {doc}`setup` `` or\n\n```md\n{doc}`setup`\n```\n"
    )
    root = _synced(
        tmp_path,
        {"start/overview.md": "# Overview\n", "guide/setup.md": "# Setup\n", "guide/page.md": page},
    )
    assert _link_rows(root, "guide/page.md") == [
        ("../start/overview", "start/overview.md", None),
        ("setup", "guide/setup.md", None),
        ("/start/overview", "start/overview.md", None),
        ("missing", None, "no document at guide/missing"),
    ]
