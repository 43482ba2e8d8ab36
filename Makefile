# plait: `make test` and `make demo` each set up what they need in .venv.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.plait-installed
SOURCES := pyproject.toml setup.py plait-aliases.pth $(shell find plait -name '*.pyx' -o -name '*.pxd' 2>/dev/null)

.PHONY: test demo install clean gpu-test bench chainer-peer spacy-peer

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# torch is optional (xp2torch/torch2xp tests skip without it). Only the CPU build that lies on
# this kind of machine is taken: a plain `pip install torch` would pull gigabytes of CUDA wheels.
TORCH_WHEELS ?= /opt/wheels

$(STAMP): $(PY) $(SOURCES)
	$(PY) -m pip install --quiet -e '.[test,peers,plot]'
	@# An editable install leaves out the interpreter-start hook of the opt-in aliases
	@# (PLAIT_AS_THINC=1, PLAIT_AS_CHAINER=1); a wheel carries it (setup.py).
	$(PY) -c "import shutil, sysconfig; shutil.copy('plait-aliases.pth', sysconfig.get_paths()['purelib'])"
	@if ls $(TORCH_WHEELS)/torch-2.13.0+cpu-*.whl >/dev/null 2>&1; then \
		$(PY) -m pip install --quiet --find-links $(TORCH_WHEELS) 'torch==2.13.0'; \
	else echo "plait: no local CPU torch wheel in $(TORCH_WHEELS); torch interop tests will skip"; fi
	@# mpi4py and the mpich wheel (libmpi, mpiexec) for plait.distributed, as in the `distributed`
	@# extra of pyproject.toml. Optional: where they cannot be installed, the MPI tests skip and say why.
	@$(PY) -m pip install --quiet 'mpi4py>=4.0,<5' 'mpich>=4.1' \
		|| echo "plait: mpi4py/mpich could not be installed; tests/distributed/test_mpi.py will skip"
	touch $(STAMP)

install: $(STAMP)

# The differential tests against chainer 7.8.1 (tests/chainer/*peer*, CTC, hierarchical softmax)
# run in the venv that bench/setup_peers.sh builds. Best effort: where it cannot be installed
# (no registry), those tests skip and say why.
CHAINER_PEER := bench/.venvs/chainer/bin/python
chainer-peer:
	@$(CHAINER_PEER) -c "import chainer" >/dev/null 2>&1 || bash bench/setup_peers.sh chainer \
		|| echo "plait: chainer 7.8.1 could not be installed; the differential tests against it will skip"

# spaCy 3.8 (with its thinc 8.3.14) for tests/spacy and bench/spacy_train.py, in the venv that
# bench/setup_peers.sh builds; plait is linked in from this checkout (built by $(STAMP)). Best
# effort: where it cannot be installed, tests/spacy skip and say why.
SPACY_PEER := bench/.venvs/spacy/bin/python
spacy-peer: $(STAMP)
	@$(SPACY_PEER) -c "import spacy, plait.thinc_alias" >/dev/null 2>&1 || bash bench/setup_peers.sh spacy \
		|| echo "plait: spaCy 3.8 could not be installed; tests/spacy will skip"

test: $(STAMP) chainer-peer spacy-peer
	$(PY) -m pytest -q tests

gpu-test: $(STAMP)
	$(PY) -m pytest -q -m gpu tests

# The main job (README, "The command line"): train the MNIST MLP of examples/mnist_mlp.cfg on
# the digits bundled with plait, report its test accuracy, then predict with the saved model.
demo: $(STAMP)
	$(PY) -m plait train examples/mnist_mlp.cfg --output training/mnist
	$(PY) -m plait evaluate training/mnist --split test
	$(PY) -m plait predict training/mnist plait/datasets/data/mnist_subset.npz --limit 10

# Side-by-side benchmarks against thinc 9.1 / thinc 8.3 / torch (bench/README.md). Peers
# without a venv are skipped: `bash bench/setup_peers.sh` creates them. Options for every
# script go in BENCH_ARGS, e.g. `make bench BENCH_ARGS="--threads 2 --rounds 5"`.
BENCH_ARGS ?=
bench: $(STAMP) spacy-peer
	$(PY) bench/mlp.py $(BENCH_ARGS)
	$(PY) bench/textcat_cnn.py $(BENCH_ARGS)
	$(PY) bench/lstm_tagger.py $(BENCH_ARGS)
	$(PY) bench/lstm_kernels.py $(BENCH_ARGS)
	$(PY) bench/ops_micro.py $(BENCH_ARGS)
	$(PY) bench/define_by_run.py $(BENCH_ARGS)
	$(PY) bench/spacy_train.py $(BENCH_ARGS)

clean:
	rm -rf build $(VENV) *.egg-info training
	find plait -name '*.so' -delete
	find plait -name '*.c' -path '*_kernels_cpu*' -delete
