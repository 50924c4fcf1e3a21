#!/usr/bin/env bash
# depgraph's commands (the README opens with the first two). Each sets up what it needs on first use:
#   ./run.sh reproduce [OUT]    reproduce the studies into OUT (default: results/)
#   ./run.sh test [ARGS...]     run the whole test suite (ARGS go to pytest)
#   ./run.sh notebook           open the notebooks in JupyterLab (installs it once)
#   ./run.sh depgraph ARGS...   the depgraph command line (e.g. ./run.sh depgraph models), or: source .venv/bin/activate
# Set-up: a virtual environment in .venv (or $DEPGRAPH_VENV) with the package
# and its test dependencies, and Graphviz's `dot` (apt-get when run as root or
# with passwordless sudo; otherwise the exact install step is printed); the
# tests also need a headless Chromium (the report.html test), installed the same way, and use
# PyTorch's CPU build where pip can get it (the profiler's smoke test; skipped, and said so, where not).
set -euo pipefail
cd "$(dirname "$0")"
VENV="${DEPGRAPH_VENV:-.venv}"

need_python() {
    for py in python3.13 python3.12 python3.11 python3; do
        if command -v "$py" >/dev/null 2>&1 &&
           "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$py"; return 0
        fi
    done
    echo "depgraph: needs Python 3.11 or newer on PATH" >&2
    exit 1
}

apt_install() {  # apt_install PACKAGE WHAT: apt-get it as root or with passwordless sudo; 1 when neither can run
    local sudo=""
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; else return 1; fi
    fi
    command -v apt-get >/dev/null 2>&1 || return 1
    echo "depgraph: installing $2 with apt-get" >&2
    $sudo apt-get update -qq >/dev/null || true
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$1" >/dev/null || true
}

install_dot() {
    command -v dot >/dev/null 2>&1 && return 0
    if ! apt_install graphviz "Graphviz (dot)" && command -v brew >/dev/null 2>&1; then
        brew install graphviz
    fi
    if ! command -v dot >/dev/null 2>&1; then
        echo "depgraph: Graphviz's 'dot' is missing and could not be installed here." >&2
        echo "  Install it with: sudo apt-get install graphviz   (Debian/Ubuntu)" >&2
        echo "               or: brew install graphviz           (macOS)" >&2
        exit 1
    fi
}

have_browser() {
    for b in chromium chromium-browser google-chrome; do command -v "$b" >/dev/null 2>&1 && return 0; done
    return 1
}

install_browser() {
    have_browser && return 0
    apt_install chromium "a headless browser (chromium), for the report.html test" || true
    have_browser && return 0
    echo "depgraph: a headless Chromium is missing and could not be installed here." >&2
    echo "  Install it with: sudo apt-get install chromium   (Debian/Ubuntu)" >&2
    exit 1
}

pip_progress() {  # pip's output as one line per package it collects, then one for the install step
    local line name n=0
    while IFS= read -r line; do
        name=""
        case "$line" in
            Collecting\ *) name="${line#Collecting }"; name="${name%%[ <>=!~;[]*}" ;;
            Processing\ *.whl*|Processing\ *.tar.gz*)  # a wheel from a local index or a file
                name="${line#Processing }"; name="${name%% (from*}"; name="${name##*/}"; name="${name%%-[0-9]*}" ;;
            Installing\ collected\ packages:*)
                name="${line#*: }"; name="${name//[^,]/}"; n=$(( ${#name} + 1 ))
                [ "$n" = 1 ] && name="1 package" || name="$n packages"
                echo "depgraph:   installing $name into $VENV (the last and longest step: no output until it ends)" >&2
                name="" ;;
        esac
        if [ -n "$name" ]; then n=$((n + 1)); echo "depgraph:   collecting $n: $name" >&2; fi
    done
}

pip_install() {  # pip_install ARGS...: pip install with its progress shown; its whole output in $VENV/pip-install.log
    local log="$VENV/pip-install.log" start=$SECONDS
    if ! "$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off "$@" 2>&1 |
            tee "$log" | pip_progress; then
        echo "depgraph: pip install failed; the end of its output (all of it is in $log):" >&2
        tail -n 15 "$log" >&2
        exit 1
    fi
    echo "depgraph: installed in $((SECONDS - start)) s" >&2
}

setup() {
    install_dot
    local stamp="$VENV/.depgraph-installed"
    local want
    want="$(cat pyproject.toml depgraph/_version.py | cksum)"  # the version is read from _version.py
    if [ ! -x "$VENV/bin/python" ]; then
        "$(need_python)" -m venv "$VENV"
    fi
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        if [ -f "$stamp" ]; then
            echo "depgraph: pyproject.toml or the version changed: updating the install in $VENV" >&2
        else
            echo "depgraph: installing the package and its dependencies into $VENV, once: about 75 packages," \
                 "1 to 3 minutes (a minute on a 2-core machine with a fast network)" >&2
        fi
        pip_install -e '.[test]'
        echo "$want" > "$stamp"
    fi
}

install_torch_cpu() {  # PyTorch's CPU build, once, for the profiler's smoke test; 1 (and a line) where it cannot be had
    "$VENV/bin/python" -c 'import torch' >/dev/null 2>&1 && return 0
    local args=(--retries 0 --timeout 30 --index-url https://download.pytorch.org/whl/cpu torch) plan
    # a dry run first: a CUDA build (gigabytes of NVIDIA libraries) is never installed for a test
    plan="$("$VENV/bin/python" -m pip install --disable-pip-version-check --dry-run "${args[@]}" 2>/dev/null |
            grep '^Would install' || true)"
    if [ -z "$plan" ] || echo "$plan" | grep -qiE 'nvidia|cuda'; then
        echo "depgraph: PyTorch's CPU build cannot be installed here; the profiler's PyTorch tests will be skipped" >&2
        return 1
    fi
    echo "depgraph: installing PyTorch's CPU build into $VENV, once (the profiler's smoke test runs on it)" >&2
    pip_install "${args[@]}"
}

cmd="${1:-}"
case "$cmd" in
    reproduce)
        shift
        setup
        exec "$VENV/bin/depgraph" reproduce "${1:-results}" "${@:2}"
        ;;
    notebook)
        shift
        setup
        if ! "$VENV/bin/python" -c 'import jupyterlab, ipywidgets' 2>/dev/null; then
            echo "depgraph: installing JupyterLab and ipywidgets into $VENV (once)" >&2
            pip_install -e '.[notebook]'
        fi
        exec "$VENV/bin/jupyter" lab notebooks "$@"
        ;;
    test)
        shift
        setup
        install_browser
        if install_torch_cpu; then export DEPGRAPH_REQUIRE_TORCH=1; fi  # then its tests must run, not skip
        DEPGRAPH_REQUIRE_BROWSER=1 exec "$VENV/bin/python" -m pytest "$@"
        ;;
    depgraph)
        shift
        setup
        exec "$VENV/bin/depgraph" "$@"
        ;;
    *)
        sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
esac
