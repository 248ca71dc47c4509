# One entry point for humans and CI. `make test` creates .venv if absent, installs, runs pytest.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: test install demo clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

install: $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[test,plots]'

test: install
	$(BIN)/python -m pytest -q

# The whole pipeline on the bundled digits (stored extractor costs; RECALIBRATE=1 measures them here):
# train CS-G-OMP/CS-G-FR, export, Python + C runtimes, report in out/report/.
demo: install
	$(BIN)/python examples/demo.py --out out $(if $(RECALIBRATE),--recalibrate)

clean:
	rm -rf $(VENV) build *.egg-info
