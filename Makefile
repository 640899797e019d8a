# The one list of commands humans and CI run.
.PHONY: install lint format typecheck test test-fast check bench eval reader

install:
	uv sync --frozen --all-packages

lint:
	uv run ruff check packages tests benchmarks
	uv run ruff format --check packages tests benchmarks
	uv run lint-imports

format:
	uv run ruff format packages tests benchmarks
	uv run ruff check --fix packages tests benchmarks

typecheck:
	uv run mypy packages/pinakes-core/src packages/pinakes-graph/src packages/pinakes-ner/src packages/pinakes-cli/src packages/pinakes-mcp/src

test:
	uv run pytest

test-fast:
	uv run pytest -m "not slow and not model"

check: lint typecheck test

bench:
	uv run python benchmarks/corpora.py --corpus ../shared/corpora/nushell-docs --corpus ../shared/corpora/dendron-site

# pnk eval on golden and the held-out nushell / dendron sets (staged outside the repo).
# `make eval EVAL_ARGS=--matrix` adds every channel configuration.
eval:
	uv run python benchmarks/eval_sets.py $(EVAL_ARGS)

# Train, export and quantise the reader (docs/reader-training.md): stage 1 on 6,400 pairs, then
# stage 2 on 4,800 pairs stage 1 did not see, from its checkpoint. Needs the `train` dependency
# group and a SQuAD 2.0 train-v2.0.json (SQUAD=path; docs/reader-training.md says where the one
# used came from). About 75 minutes on 2 busy CPU cores.
SQUAD ?= ../shared/datasets/squad2/train-v2.0-first10.json
reader:
	uv sync --frozen --all-packages --group train
	uv run --group train python benchmarks/train_reader.py --squad $(SQUAD) \
		--work build/reader --out build/reader/stage1 --log build/reader/stage1.log
	uv run --group train python benchmarks/train_reader.py --squad $(SQUAD) \
		--continue-from build/reader/checkpoint.pt --after-pairs 6400 \
		--continue-provenance build/reader/stage1/provenance.json \
		--max-pairs 4800 --lr 5e-5 --work build/reader-stage2 --log build/reader/stage2.log
