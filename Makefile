# Two commands do all the set-up on a fresh machine:
#   make run   - install the Debian packages the window needs (sysdeps), create .venv,
#                install the app and its bundled models, start the window
#   make test  - the same set-up plus the test-only packages and extras, then the test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# This torch/torchvision pair lies on local disk (x86_64, Python 3.11); installing it
# first keeps pip from resolving the project's torch range to a download from the index.
# (PyPI's torchvision does not import beside the torch==2.13.0 CPU file, and easyocr's
# CRAFT detector needs torchvision.) On aarch64: TORCH="torch==2.9.1 torchvision==0.24.1".
TORCH  ?= torch==2.14.1 torchvision==0.29.1
STAMP  := $(VENV)/.installed

# Debian/Ubuntu packages: the one list `make sysdeps` installs (.ci/run uses it too).
# To build the venv:
BUILD_PACKAGES := python3 python3-venv make
# What the window needs: PortAudio (microphone), libsndfile, the Qt (PySide6 wheel) runtime
# libraries, the xcb platform plugin's libraries, fonts (DejaVu; Droid Sans Fallback draws CJK tokens).
RUN_PACKAGES := $(BUILD_PACKAGES) libportaudio2 libsndfile1 \
	libegl1 libgl1 libopengl0 libglib2.0-0 libdbus-1-3 libfontconfig1 libfreetype6 \
	libxkbcommon0 libx11-6 libxcb1 libxkbcommon-x11-0 libxcb-cursor0 libxcb-icccm4 \
	libxcb-keysyms1 libxcb-shape0 libxcb-randr0 libxcb-render-util0 libxcb-image0 \
	libxcb-xinerama0 fonts-dejavu-core fonts-droid-fallback
# Tests only: PulseAudio + ALSA pulse plugin (the fake microphone), espeak-ng and sox
# (synthetic speech), fonts for rendered OCR images, a virtual X server.
TEST_PACKAGES := pulseaudio pulseaudio-utils libasound2-plugins espeak-ng sox \
	fonts-liberation fontconfig xvfb
# `make test`/`make bench` (and `make sysdeps WITH_TESTS=1`) add TEST_PACKAGES.
SYSDEPS = $(RUN_PACKAGES) $(if $(WITH_TESTS),$(TEST_PACKAGES))
test bench: WITH_TESTS = 1

.PHONY: run test bench clean sysdeps

# Installs what is missing of $(SYSDEPS) (apt-get as root or through `sudo -n`; otherwise
# one line with the command to run); prints nothing when all is there.
sysdeps:
	@sh .ci/sysdeps.sh $(SYSDEPS)

$(PY): | sysdeps
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q -e ".[models,test,sweep]"
	touch $(STAMP)

run: sysdeps $(STAMP)
	$(VENV)/bin/decoding-explorer

test: sysdeps $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q --durations=25 tests --ignore=tests/bench

bench: sysdeps $(STAMP)
	for b in tests/bench/bench_*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info
