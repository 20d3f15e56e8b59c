# carbonshift developer commands. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUNTIME := $(VENV)/.runtime
# What `make bench` runs unless BENCH says otherwise (python -m bench alone runs them all).
BENCH ?= admission score
PY_DIRS := webhook devtools tests bench
# Unit, property and wire tests on both cores (pytest-xdist).
UNIT := -m "not e2e" -q -n 2
# The decision core and the kind registry stay covered at the level they reached (97 %).
COVERAGE := --cov=webhook.decision --cov=webhook.kinds --cov-report=term:skip-covered --cov-fail-under=95
# The image's runtime dependencies: exact versions with hashes for its Python (3.11.14, Linux).
# The same command is recorded at the top of requirements.lock. Pins already in the file
# are kept while they satisfy pyproject.toml; add --upgrade to move to the newest releases.
LOCK := uv pip compile pyproject.toml --generate-hashes --python-version 3.11.14 --python-platform linux --output-file requirements.lock

.PHONY: help venv run test unit tools lint typecheck bench soak clean binaries crds sandbox sandbox-down e2e plugin-test lock

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(RUNTIME): pyproject.toml
	@echo "creating $(VENV) with carbonshift and its runtime dependencies (first run: about 10-60 s)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	@echo "installing the development tools into $(VENV) (first run: about 1-2 min)"
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP) ## Create the virtualenv and install carbonshift with its dev tools

run: $(RUNTIME) ## Start the webhook on https://127.0.0.1:8443 with the embedded data (installs only what running needs)
	$(BIN)/carbonshift serve --config config/example.yaml --host 127.0.0.1 --port 8443 --cert-dir certs

lint: $(STAMP) ## ruff + mypy --strict + the import contracts (.importlinter) + hadolint + actionlint
	$(BIN)/ruff check $(PY_DIRS)
	$(BIN)/ruff format --check $(PY_DIRS)
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/hadolint Dockerfile
	@if command -v go >/dev/null || [ "$$CI" = true ]; then hack/build-actionlint.sh \
		&& "$${CARBONSHIFT_CACHE:-.cache/bin}/actionlint" -no-color -oneline; \
	else echo "go not found: skipping actionlint (.github/workflows)"; fi

typecheck: $(STAMP)
	$(BIN)/mypy

.PHONY: generate
generate: $(STAMP) ## Regenerate files derived from the code: the chart's config schema (values.schema.json); the webhook and ClusterRole rules (kind registry)
	$(BIN)/python -m devtools.chart_schema
	$(BIN)/python -m devtools.manifests

unit: $(STAMP) crds tools ## Unit, property and wire tests (no control plane), on both cores
	$(BIN)/pytest $(UNIT) $(COVERAGE)

tools: ## promtool and Prometheus for the rule, dashboard and e2e tests, built from their pinned Go module (cached)
	@if command -v go >/dev/null || [ "$$CI" = true ]; then hack/build-prometheus.sh promtool prometheus; \
	else echo "go not found: the alerting-rule tests will skip"; fi

test: $(STAMP) lint crds tools ## Everything: lint, unit, wire, Go plugin and end-to-end tests
	$(BIN)/pytest $(UNIT) $(COVERAGE)
	$(MAKE) plugin-test
	$(MAKE) e2e

plugin-test: ## go vet + go test of the Karmada scheduler plugin (karmada-plugin/)
	@if command -v go >/dev/null || [ "$$CI" = true ]; then \
		cd karmada-plugin && test -z "$$(gofmt -l .)" && GOTOOLCHAIN=local go vet ./... && GOTOOLCHAIN=local go test ./...; \
	else echo "go not found: skipping the plugin's Go tests"; fi

binaries: ## Build the pinned etcd, kube-apiserver, kubectl, karmada-* into .cache/bin and fetch their CRDs (Go)
	hack/build-binaries.sh

crds: ## Fetch the CRDs the tests read from the pinned Go modules into .cache/bin/crds (cached; offline once fetched)
	hack/crds.sh --no-generate

e2e: $(STAMP) ## End-to-end tests: kubectl apply against a real kube-apiserver (builds binaries)
	@# Build outside pytest's per-test timeout; without Go (and not in CI) the tests skip.
	@if command -v go >/dev/null || [ "$$CI" = true ]; then hack/build-binaries.sh; \
		hack/build-prometheus.sh prometheus; hack/build-ocm.sh; hack/build-kueue.sh; fi
	$(BIN)/pytest -m e2e -q tests/e2e

SANDBOX ?= karmada
sandbox: $(STAMP) binaries ## Local Karmada fleet (control plane + 3 member clusters) and a Karpenter cluster, with carbonshift; SANDBOX=kueue: a Kueue MultiKueue manager and 2 workers, carbonshift serve dispatching
ifeq ($(SANDBOX),kueue)
	hack/build-kueue.sh
	$(BIN)/python -m devtools.sandbox.kueue up --carbonshift
else
	$(BIN)/python -m devtools.sandbox up
endif

sandbox-down: ## Stop everything `make sandbox` started (either kind) and remove .sandbox/
	$(BIN)/python -m devtools.sandbox.kueue down
	$(BIN)/python -m devtools.sandbox down

bench: $(STAMP) ## Benchmarks (BENCH="admission score", the default); results to bench/results/ and docs/benchmarks.md
	@command -v wrk >/dev/null || { echo "installing wrk (Debian package)"; apt-get install -y -qq wrk; }
	$(BIN)/python -m bench $(BENCH)

soak: $(STAMP) ## Ten minutes of admissions + scores at half the maximum: RSS, fds, p99 and a plot
	@command -v wrk >/dev/null || { echo "installing wrk (Debian package)"; apt-get install -y -qq wrk; }
	$(BIN)/python -m bench soak

lock: $(STAMP) ## Re-resolve requirements.lock (the image's pinned, hashed runtime dependencies)
	$(BIN)/$(LOCK)

clean: ## Remove the virtualenv and caches (not the Go binary cache)
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis

.PHONY: fuzz
fuzz: $(STAMP) crds ## Full fuzz run (~10,000 reviews from the CRD schemas + malformed envelopes) against carbonshift serve
	CARBONSHIFT_FUZZ_SCALE=5 $(BIN)/pytest -q -s tests/serve/test_hardening_fuzz.py

.PHONY: image helm
image: ## Build the container image here with no Docker engine or registry (buildah on a Debian base from mmdebstrap)
	hack/build-image.sh build

helm: ## Build Helm from its pinned Go module into .cache/bin (charts/carbonshift tests)
	hack/build-helm.sh
