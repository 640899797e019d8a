"""How far above the real input size the paid path's worst-case input bound sits.

For a few questions over a KB, builds the synthesis prompt `pnk ask` would send and compares
Pinakes' input bound (UTF-8 bytes + chat overhead, see docs/ask.md "Cost model") with litellm's
``token_counter`` for some models. Free: no call is made.

    uv run python benchmarks/ask_bounds.py --kb examples/distsys-notes
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

QUESTIONS = (
    "why does raft need a majority to elect a leader?",
    "what is a vector clock",
    "how does two-phase commit handle a coordinator crash",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=Path, default=Path("examples/distsys-notes"))
    parser.add_argument("--models", default="gpt-4o-mini,claude-3-5-haiku-20241022")
    args = parser.parse_args()
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    from pinakes_core import KB
    from pinakes_core.paid.llm import input_token_ceiling
    from pinakes_core.paid.passages import Passage, synthesis_messages

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "kb"
        shutil.copytree(args.kb, root, ignore=shutil.ignore_patterns(".pinakes"))
        kb = KB.open(root)
        kb.sync()
        cfg = kb.config.ask
        print("| question | model | input bound | tokens | bound / tokens |")
        print("|---|---|---|---|---|")
        for question in QUESTIONS:
            hits = kb.search(question, k=cfg.passages).hits
            passages = [Passage.from_hit(h, kb.config.kb.id) for h in hits]
            messages, _ = synthesis_messages(question, passages, None, cfg.passage_bytes)
            bound = input_token_ceiling(messages)
            for model in args.models.split(","):
                tokens = litellm.token_counter(model=model, messages=messages)
                print(f"| {question} | {model} | {bound} | {tokens} | {bound / tokens:.2f} |")
        kb.close()


if __name__ == "__main__":
    main()
