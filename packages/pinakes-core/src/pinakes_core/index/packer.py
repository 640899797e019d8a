"""Packing a document's lines into chunks of at most ``budget`` tokens (DESIGN §4).

:class:`Packer` takes the line ranges of a body's blocks (:mod:`pinakes_core.read.blocks`)
and packs them greedily into :class:`Chunk` objects: a block over the budget is split into pieces of
about equal size at line, then sentence, then word boundaries, a window with no content joins a
neighbour, and :func:`within_cap` keeps every chunk under the character cap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pinakes_core.index.tokens import TokenCounter

if TYPE_CHECKING:
    pass

__all__ = [
    "CHARS_PER_TOKEN_CAP",
    "Chunk",
    "Packer",
    "char_cost",
    "within_cap",
]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


# A unit of text costs at least one token per this many characters. Real text runs 3 to 6
# characters per token, but the tokenizer counts a "word" of over 100 characters (a blob of
# base64 or minified code) as one unknown token, which would let one chunk grow without bound.
CHARS_PER_TOKEN_CAP = 16
# Three or more line breaks with nothing but spaces between them (a run of blank lines).
_BLANK_RUN = re.compile(r"\n(?:[ \t\r\f\v]*\n){2,}")


@dataclass(frozen=True)
class Chunk:
    """One retrieval unit.

    Attributes:
        ordinal: position in the document, from 0.
        heading_path: the headings enclosing the chunk, outermost first.
        text: the chunk's source text (trimmed of blank lines at both ends).
        start_line: first line in the file, 1-based (frontmatter lines count).
        end_line: last line in the file, 1-based, inclusive.
        tokens: WordPiece token count of ``text``.
        page_start: first page the chunk's text is on (paged sources: PDF), else ``None``.
        page_end: last page, inclusive.
    """

    ordinal: int
    heading_path: tuple[str, ...]
    text: str
    start_line: int
    end_line: int
    tokens: int
    page_start: int | None = None
    page_end: int | None = None


class Packer:
    """Greedy packing of line ranges into windows of at most ``budget`` tokens.

    A window that holds no content line (only headings, rules and markup) is never a chunk: its
    lines join the chunk before when they hold no heading and that chunk is of the same section
    (markup closing the section), else they are carried onto the next chunk, or, at the end of
    the document, onto the last one. Joined or carried lines may take that chunk over the budget
    by their own (few) tokens.
    """

    def __init__(
        self,
        lines: list[str],
        offset: int,
        budget: int,
        count: TokenCounter,
        content: list[bool] | None = None,
        dropped: set[int] | None = None,
        headings: set[int] | None = None,
    ) -> None:
        self.lines = lines
        self.dropped = dropped or set()
        self.headings = headings or set()  # body lines of headings
        self.offset = offset
        self.budget = budget
        self.count = count
        measured = [self.measure(line) if line.strip() else (0, 0) for line in lines]
        self.costs = [cost for cost, _ in measured]
        self.tokens = [tokens for _, tokens in measured]
        self.content = content if content is not None else [bool(line.strip()) for line in lines]
        # Body-less headings waiting for a chunk: [carry, carry_end) in body lines, and what
        # they cost (kept as they grow: summing the run again at every heading was quadratic,
        # ten minutes for 100,000 empty headings).
        self.carry: int | None = None
        self.carry_end = 0
        self.carry_cost = 0
        self.carry_chars = 0
        #: Body-less heading lines left out because too many were waiting.
        self.left_out = 0
        self.out: list[tuple[tuple[str, ...], str, int, int, int]] = []

    def measure(self, text: str) -> tuple[int, int]:
        """Return what ``text`` counts against the budget, and its tokens.

        The cost is its token count, or more for very long words (see ``CHARS_PER_TOKEN_CAP``).
        Text over budget by its length alone is not tokenized (a multi-megabyte line would take
        seconds) and its tokens are returned as 0: such text is never emitted whole.
        """
        chars = char_cost(text)
        if chars > self.budget:
            return chars, 0
        tokens = self.count(text)
        return max(tokens, chars), tokens

    def emit(self, path: tuple[str, ...], start: int, end: int) -> None:
        """Make a chunk of lines ``start``-``end`` (exclusive) under heading path ``path``."""
        lo, hi = start, end
        while lo < hi and not self.lines[lo].strip():
            lo += 1
        while hi > lo and not self.lines[hi - 1].strip():
            hi -= 1
        if lo == hi:
            return
        if not any(self.content[lo:hi]):
            if (
                self.carry is None
                and self.out
                and self.out[-1][0] == path
                and self.headings.isdisjoint(range(lo, hi))
            ):
                # Markup closing a section (a "</div>" left after the budget cut) stays with
                # the section's text before it rather than leading the next section's chunk.
                last_path, last_text, start, _, tokens = self.out[-1]
                self.out[-1] = (
                    last_path,
                    last_text + "\n" + self.join(self.out[-1][3] - self.offset, hi),
                    start,
                    hi + self.offset,
                    tokens + sum(self.tokens[lo:hi]),
                )
                return
            if self.carry is None:
                self.carry, self.carry_end, self.carry_cost, self.carry_chars = lo, lo, 0, 0
            self.carry_cost += sum(self.costs[self.carry_end : hi])
            self.carry_chars += sum(len(line) + 1 for line in self.lines[self.carry_end : hi])
            self.carry_end = hi
            return
        if self.carry is not None:
            self.trim_carry()
            lo, self.carry = self.carry, None
        text = self.join(lo, hi)
        self.out.append(
            (path, text, lo + 1 + self.offset, hi + self.offset, sum(self.tokens[lo:hi]))
        )

    def trim_carry(self) -> None:
        """Leave out the oldest carried lines past half a chunk's characters (counted).

        They are about to lead a chunk, and the other half is for its text: a page of 100,000
        empty headings made one chunk of a million characters.
        """
        assert self.carry is not None
        while self.carry_chars > self.budget * CHARS_PER_TOKEN_CAP // 2 and (
            self.carry < self.carry_end
        ):
            self.carry_cost -= self.costs[self.carry]
            self.carry_chars -= len(self.lines[self.carry]) + 1
            self.left_out += bool(self.lines[self.carry].strip())
            self.carry += 1

    def join(self, lo: int, hi: int) -> str:
        """The text of body lines ``[lo, hi)``, without the dropped ones."""
        if not self.dropped or self.dropped.isdisjoint(range(lo, hi)):
            return "\n".join(self.lines[lo:hi])
        kept: list[str] = []
        gap = False  # just past dropped lines
        for i in range(lo, hi):
            if i in self.dropped:
                gap = True
                continue
            # A gap left by dropped lines is one blank line, as between any two blocks.
            if gap and not self.lines[i].strip() and (not kept or not kept[-1].strip()):
                continue
            gap = False
            kept.append(self.lines[i])
        while kept and not kept[-1].strip():
            kept.pop()
        return "\n".join(kept)

    def emit_long_line(self, path: tuple[str, ...], line: int) -> None:
        """Make chunks of one line longer than the budget, cut at sentences, then words."""
        # Sentences first, words only for a sentence that alone exceeds the budget, and a cut
        # by tokens only for a word that alone exceeds it. Parts are joined again with single
        # spaces, where the tokenizer splits words anyway, so a piece's tokens are the sum of
        # its parts' tokens. Body-less headings carried onto the first piece take their room
        # from that piece's budget (with one unit per joining newline) unless they would leave
        # it less than half; the first piece holds at least one part, so the headings take it
        # over the budget by at most their own tokens. (They once shrank every piece's budget: seven headings before a long list
        # item cut the item into one-character chunks.)
        budget = self.budget
        first = budget
        if self.carry is not None:
            self.trim_carry()
            first -= sum(self.costs[self.carry : line]) + (line - self.carry)
            if first < budget // 2:  # headings alone nearly fill it: they lead a full piece
                first = budget
        parts: list[tuple[str, int, int]] = []
        for sentence in _SENTENCE_END.split(self.lines[line].strip()):
            cost, tokens = self.measure(sentence)
            if cost <= budget:
                if sentence:
                    parts.append((sentence, cost, tokens))
                continue
            for word in sentence.split():
                cost, tokens = self.measure(word)
                if cost <= budget:
                    parts.append((word, cost, tokens))
                else:
                    parts.extend(self.hard_split(word, budget))
        if parts and parts[0][1] > first:
            # The first part alone would take the first piece past its room (a blob cut to
            # the full budget): it is cut to that room, so the piece keeps the character cap.
            parts[:1] = self.hard_split(parts[0][0], first)
        piece: list[str] = []
        used = counted = 0
        limit = first
        for part, cost, tokens in parts:
            if piece and used + cost > limit:
                self._piece(path, line, piece, counted)
                piece, used, counted, limit = [], 0, 0, budget
            piece.append(part)
            used += cost
            counted += tokens
        if piece:
            self._piece(path, line, piece, counted)

    def hard_split(self, text: str, budget: int | None = None) -> list[tuple[str, int, int]]:
        """Cut text that has no word boundary into pieces within ``budget`` (last resort).

        Each piece is sized from the last one's characters per token, so a long blob costs
        about one token count per piece. ``budget`` defaults to the packer's. Returns
        ``(piece, cost, tokens)`` triples.
        """
        budget = self.budget if budget is None else budget
        widest = budget * CHARS_PER_TOKEN_CAP
        pieces = []
        start, width = 0, widest
        while start < len(text):
            piece = text[start : start + width]
            cost, tokens = self.measure(piece)
            if cost > budget and width > 1:
                width = max(1, min(width // 2 + 1, int(width * budget / cost * 0.95)))
                continue
            pieces.append((piece, cost, tokens))
            start += len(piece)
            if cost < budget * 0.8:
                width = min(widest, width + width // 4 + 1)
        return pieces

    def _piece(self, path: tuple[str, ...], line: int, words: list[str], tokens: int) -> None:
        number = line + 1 + self.offset
        text = " ".join(words)
        start = number
        if self.carry is not None:  # body-less headings lead the first piece
            text = "\n".join([self.join(self.carry, line), text]) if self.carry < line else text
            tokens += sum(self.tokens[self.carry : line])
            start, self.carry = self.carry + 1 + self.offset, None
        self.out.append((path, text, start, number, tokens))

    def pack(self, path: tuple[str, ...], units: list[tuple[int, int]]) -> None:
        """Pack consecutive units (line ranges) into windows, splitting oversize units."""
        win_start: int | None = None
        win_end = 0
        used = 0
        if self.carry is not None:  # headings carried from a body-less section open the window
            self.trim_carry()
            win_start, win_end, self.carry = self.carry, self.carry_end, None
            used = self.carry_cost
        for start, end in units:
            cost = sum(self.costs[start:end])
            if (
                win_start is not None
                and used + cost > self.budget
                and cost <= self.budget
                and any(self.content[win_start:win_end])
            ):
                self.emit(path, win_start, win_end)
                win_start, used = None, 0
            if cost <= self.budget:
                if win_start is None:
                    win_start = start
                win_end, used = end, used + cost
                continue
            # An oversize unit: split at line boundaries (the open window, e.g. a heading line,
            # joins the first piece), and a single oversize line at sentences, then words. The
            # pieces are of about equal size (a line goes to the next piece once its middle
            # passes the share), not full ones and a runt: a long code block once left "};\n}"
            # as a chunk of its own, a long table its last two rows.
            line_start = start if win_start is None else win_start
            line_used = used
            win_start = None
            left = used + cost  # what the pieces from line_start on share
            share = _even_share(left, self.budget)
            for line in range(start, end):
                line_cost = self.costs[line]
                if line_cost > self.budget and self.content[line]:
                    self.emit(path, line_start, line)
                    self.emit_long_line(path, line)
                    left -= line_used + line_cost
                    line_start, line_used = line + 1, 0
                    share = _even_share(left, self.budget)
                    continue
                over = line_used + line_cost > self.budget or line_used + line_cost / 2 > share
                if over and any(self.content[line_start:line]):
                    self.emit(path, line_start, line)
                    left -= line_used
                    share = _even_share(left, self.budget)
                    line_start, line_used = line, 0
                line_used += line_cost
            if line_start < end:
                win_start, win_end, used = line_start, end, line_used
            else:
                used = 0
        if win_start is not None:
            self.emit(path, win_start, win_end)

    def finish(self) -> None:
        """Attach body-less headings left at the end of the document to the last chunk."""
        if self.carry is None or not self.out:
            self.carry = None  # a document of nothing but headings has no chunks
            return
        path, text, start, end, tokens = self.out[-1]
        tail = range(end - self.offset, self.carry_end)  # body lines after the last chunk
        room = self.budget * CHARS_PER_TOKEN_CAP - len(text)
        stop = tail.stop
        if sum(len(self.lines[i]) + 1 for i in tail) > room:
            # Past the character cap: the first lines that fit stay (the chunk stays a slice).
            stop = tail.start
            while stop < tail.stop and room > len(self.lines[stop]):
                room -= len(self.lines[stop]) + 1
                stop += 1
            while stop > tail.start and not self.lines[stop - 1].strip():
                stop -= 1

        # The count of lines left out: those trimmed from this run before and now kept
        # (from the start, as they fit) are not, those past what fits are.
        def shown(lo: int, hi: int) -> int:
            return sum(bool(self.lines[i].strip()) for i in range(lo, hi))

        carry = self.carry
        self.left_out += shown(max(stop, carry), tail.stop) - shown(tail.start, min(stop, carry))
        self.carry_end, tail = stop, range(tail.start, stop)
        if tail:
            text = "\n".join([text, self.join(tail.start, tail.stop)])
        tokens += sum(self.tokens[i] for i in tail)
        self.out[-1] = (path, text, start, self.carry_end + self.offset, tokens)
        self.carry = None


def within_cap(
    out: list[tuple[tuple[str, ...], str, int, int, int]],
    budget: int,
    count: TokenCounter,
    notes: list[str] | None,
) -> list[Chunk]:
    """The packed chunks as :class:`Chunk`, none past ``budget`` × 16 characters.

    The packer keeps to that cap but for what it joins to a chunk beyond its budget (carried
    headings, runs of blank lines, which cost nothing). Such a chunk loses its blank-line runs
    first, then whatever is past the cap, with a line in ``notes``: it is a last resort.
    """
    cap = budget * CHARS_PER_TOKEN_CAP
    chunks = []
    for i, (path, text, start, end, tokens) in enumerate(out):
        if len(text) > cap:
            text = _BLANK_RUN.sub("\n\n", text)
            if len(text) > cap:
                cut = text[:cap]
                newline = cut.rfind("\n")
                cut = cut[:newline] if newline > cap // 2 else cut
                if notes is not None:
                    notes.append(
                        f"a chunk at lines {start}-{end} is {len(text):,} characters, over the "
                        f"cap of {cap:,} ([sync] chunk_tokens × 16): its last "
                        f"{len(text) - len(cut):,} characters are not indexed"
                    )
                text = cut
            tokens = count(text)
        chunks.append(Chunk(i, path, text, start, end, tokens))
    return chunks


def _even_share(total: int, budget: int) -> float:
    """The size of each of the fewest pieces of at most ``budget`` that ``total`` splits into."""
    return total / max(1, -(-total // budget))


def char_cost(text: str) -> int:
    """The least token count ``text`` is charged: one per :data:`CHARS_PER_TOKEN_CAP` characters."""
    return -(-len(text) // CHARS_PER_TOKEN_CAP)
