# One entry point for humans and CI. `make test` creates .venv if absent, installs (again only when
# pyproject.toml or constraints.txt changed), runs pytest.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.edgeseq-installed
EXTRAS ?= test,plots,docs

.PHONY: test install demo docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# setuptools prints a notice for every editable install of a package whose folders are mapped
# (export/ -> edgeseq.export); edgeseq/_source_tree.py handles exactly that, so the notice is dropped.
# The stamp records the installed dependency set: touching pyproject.toml or constraints.txt reinstalls.
$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/pip install -q --disable-pip-version-check -c constraints.txt -e '.[$(EXTRAS)]' 2>&1 \
	  | awk '/BuildBackendWarning: Editable installation/ {skip=1} !skip {print} /with strategy, WheelFile/ {skip=0}'
	@$(BIN)/python -c "import edgeseq" && touch $(STAMP)

install: $(STAMP)

test: install
	$(BIN)/python -m pytest -q

# The whole pipeline on the bundled digits (stored extractor costs; RECALIBRATE=1 measures them here):
# train CS-G-OMP/CS-G-FR, export, Python + C runtimes, report in out/demo/report/.
demo: install
	$(BIN)/python examples/demo.py --out out/demo $(if $(RECALIBRATE),--recalibrate)

# The documentation site, built strictly (every warning is an error) into site/.
docs: install
	$(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) build *.egg-info site
