"""MDX files: read as the Markdown between their components, line for line (pinakes_core.read.mdx)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from conftest import FakeHashEmbedder, make_kb
from pinakes_core import KB
from pinakes_core.read.mdx import MAX_OPEN_LINES, is_mdx, markdown_of

PAGE = """---
title: Sidebar navigation
---

import { Tabs, TabItem } from '@astrojs/starlight/components';
import Preview from '~/components/preview.astro';

export const meta = {
  draft: false,
};

Import your notes from Evernote with the importer.

<Tabs>
<TabItem label="npm">

Run the installer with npm, then restart.

</TabItem>
</Tabs>

<Preview
\tconfig={[
\t\t{ label: 'constellations', items: [{ link: '' }] },
\t]}
/>

<LinkCard
	href="https://github.com/example/starlight-giscus"
	title="starlight-giscus"
	description="Add Giscus comments to your docs site."
/>

<Aside type="caution">Never share your zephyrine token.</Aside>

Use the `<Aside>` component for notes. {/* an editor's comment */}

{/*
a longer comment
*/}

```tsx
import { Aside } from '@astrojs/starlight/components';
<Aside>inside a code sample</Aside>
```

<>
Fragment text stays.
</>
"""


def test_markdown_of_blanks_components_and_module_lines_but_keeps_text() -> None:
    out = markdown_of(PAGE)
    lines = out.split("\n")
    assert len(lines) == len(PAGE.split("\n"))  # line numbers still point into the file
    assert lines[:3] == ["---", "title: Sidebar navigation", "---"]
    kept = [line for line in lines if line.strip()]
    assert kept[3:] == [
        "Import your notes from Evernote with the importer.",  # prose, not an import
        "npm",  # a tab's label is words the page shows
        "Run the installer with npm, then restart.",
        "starlight-giscus",  # a card's title and description are shown
        "Add Giscus comments to your docs site.",
        "Never share your zephyrine token.",
        "Use the `<Aside>` component for notes.",  # a tag in a code span is text
        "```tsx",
        "import { Aside } from '@astrojs/starlight/components';",  # code samples untouched
        "<Aside>inside a code sample</Aside>",
        "```",
        "Fragment text stays.",
    ]
    for gone in ("@astrojs", "meta", "draft", "<Tabs>", "TabItem", "config={", "constellations"):
        assert gone not in "\n".join(lines[:-12]), gone
    assert "editor's comment" not in out and "a longer comment" not in out


def test_a_tag_or_comment_never_closed_was_text() -> None:
    body = "<Widget\n" + "".join(f"line {i} of prose\n" for i in range(MAX_OPEN_LINES + 5))
    assert markdown_of(body).split("\n")[1:] == body.split("\n")[1:]
    tail = "Intro.\n\n{/* unfinished\nstill here\n"
    assert markdown_of(tail) == tail
    assert markdown_of("<Open\nnever closed at the end") == "<Open\nnever closed at the end"


@given(st.text(alphabet="<>/{}*`~'\"ATabimport export-\n x=", max_size=300))
def test_markdown_of_keeps_the_line_count_and_never_raises(text: str) -> None:
    assert markdown_of(text).count("\n") == text.count("\n")


def test_mdx_files_are_indexed_by_default_without_their_components(tmp_path: Path) -> None:
    root = make_kb(
        tmp_path / "kb",
        {
            "guides/sidebar.mdx": PAGE,
            "guides/plain.md": "# Plain\n\nSee the [sidebar guide](sidebar.mdx).\n",
        },
    )
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        report = kb.sync()
        assert sorted(report.added) == ["guides/plain.md", "guides/sidebar.mdx"]
        hit = kb.search("zephyrine token", channels=["bm25"]).hits[0]
        assert hit.path == "guides/sidebar.mdx" and hit.title == "Sidebar navigation"
        assert hit.source_type == "markdown"
        texts = [h.text for h in kb.search("installer npm", channels=["bm25"]).hits]
        assert texts and not any("@astrojs/starlight/components';\nimport" in t for t in texts)
        assert not kb.search("constellations", channels=["bm25"]).hits  # a prop, not text
        assert kb.search("inside a code sample", channels=["bm25"]).hits  # code is text
        plain = kb.search("Plain", channels=["bm25"]).hits[0].doc_id
        out = [n.path for n in kb.links(plain).neighbours if n.direction == "out"]
        assert out == ["guides/sidebar.mdx"]
    assert (root / "guides" / "sidebar.mdx").read_text(encoding="utf-8") == PAGE  # as written


def test_a_markdown_file_that_imports_a_module_is_read_as_mdx(tmp_path: Path) -> None:
    # Docusaurus reads .md files as MDX: its docs import components in them.
    docusaurus = (
        "---\ntitle: Install\n---\n\nimport Tabs from '@theme/Tabs';\n"
        "import TabItem from '@theme/TabItem';\n\n<Tabs>\n"
        '<TabItem value="npm" label="npm">\n\nRun the quasarine installer.\n\n</TabItem>\n</Tabs>\n'
    )
    about = (
        "# About imports\n\n```js\nimport Tabs from '@theme/Tabs';\n```\n\n"
        "<Tabs> stays text here: import nothing from this page.\n"
    )
    assert is_mdx("docs/install.md", docusaurus)
    assert not is_mdx("docs/about.md", about)  # an import in code marks nothing
    assert not is_mdx("docs/plain.md", "Import your notes from Evernote.\n")
    root = make_kb(tmp_path / "kb", {"install.md": docusaurus, "about.md": about})
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        (hit,) = kb.search("quasarine installer", channels=["bm25"], k=1).hits
        assert hit.path == "install.md"
        assert "Tabs" not in hit.text and "@theme" not in hit.text
        assert "Run the quasarine installer." in hit.text


VITEPRESS = """# Why Korvane

Korvane serves modules on demand.

<script setup>
import bundlerSvg from '../images/bundler.svg?raw'
import { data } from './_data/team.data'
</script>
<svg-image :svg="bundlerSvg" />

## A Unified Toolchain

One pipeline from development to production.

<style scoped>
.grid { display: flex }
</style>

## Where Korvane is Heading

A full bundle mode.
"""


def test_a_script_setup_element_is_blanked_whole_and_the_headings_after_it_stay(
    tmp_path: Path,
) -> None:
    # VitePress pages import their Vue components in <script setup>: the file reads as MDX,
    # and the imports' ESM block took the </script> line, leaving an HTML block to the end.
    assert is_mdx("guide/why.md", VITEPRESS)
    out = markdown_of(VITEPRESS)
    assert out.count("\n") == VITEPRESS.count("\n")
    assert "<script" not in out and "import" not in out and ".grid" not in out
    assert "## A Unified Toolchain" in out and "## Where Korvane is Heading" in out
    unclosed = "Intro.\n\n<script>\nconst a = 1\n"
    assert markdown_of(unclosed) == unclosed  # never closed: left as it was
    root = make_kb(tmp_path / "kb", {"guide/why.md": VITEPRESS})
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        (hit,) = kb.search("full bundle mode", channels=["bm25"], k=1).hits
        assert hit.title == "Why Korvane"
        assert hit.heading_path == ["Why Korvane", "Where Korvane is Heading"]
        assert not kb.search("team data", channels=["bm25"]).hits  # the imports are code
