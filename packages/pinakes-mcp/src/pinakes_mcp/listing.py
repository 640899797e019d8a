"""``resources/list``: every served document as a ``pnk://<kb>/<doc ULID>`` resource, paged.

The list is built when a client asks (documents come and go), at most :data:`MAX_LISTED`
documents; the server pages it (``list_page_size``) with opaque cursors. Reading a listed URI
goes through the ``pnk://{kb}/{doc_id}`` template, like any other document URI.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio.to_thread
from fastmcp.resources.types import TextResource
from fastmcp.server.providers import Provider
from pydantic import AnyUrl

from pinakes_core import PinakesError
from pinakes_mcp.served import Registry

__all__ = ["MAX_LISTED", "PAGE_SIZE", "DocumentProvider"]

#: documents per resources/list page.
PAGE_SIZE = 100
#: most documents listed in all (over all served KBs).
MAX_LISTED = 50_000


class DocumentProvider(Provider):
    """Lists the served KBs' documents as resources; reading is left to the URI template."""

    def __init__(self, registry: Registry) -> None:
        super().__init__()
        self._registry = registry

    async def _list_resources(self) -> Sequence[TextResource]:
        return await anyio.to_thread.run_sync(self._documents)

    async def _get_resource(self, uri: str, version: object = None) -> None:
        return None  # the pnk://{kb}/{doc_id} template reads every document

    def _documents(self) -> list[TextResource]:
        found: list[TextResource] = []
        for served in self._registry:
            # A KB still in its start-up sync is left out (never waited for: hosts list
            # resources while initializing); it is listed from the next request on.
            if not served.ready.is_set() or served.error is not None:
                continue
            offset: int | None = 0
            while offset is not None and len(found) < MAX_LISTED:
                try:
                    with self._registry.using(served) as kb:
                        page = kb.documents(offset=offset, limit=1000)
                except PinakesError:
                    break
                found += [
                    TextResource(
                        uri=AnyUrl(f"pnk://{served.name}/{doc.doc_id}"),
                        name=doc.path,
                        title=doc.title,
                        description=f"{doc.title} ({served.name}: {doc.path})",
                        mime_type="text/markdown",
                        text="",
                    )
                    for doc in page.documents
                ]
                offset = page.next_offset
        return found[:MAX_LISTED]
