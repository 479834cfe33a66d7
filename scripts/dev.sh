#!/usr/bin/env bash
# Tidelake developer entry point.
#   scripts/dev.sh start [serve flags...]  install everything, then run `tidelake serve`
#   scripts/dev.sh test  [pytest args...]  install everything, then run the checks and the test suite
#   scripts/dev.sh install                  only install
# Installs: Debian packages (Java 17 for Spark and the Hive Metastore, kcat,
# the SQLite JDBC driver, Chromium for the UI test), a virtualenv in .venv with
# Tidelake and its test and Spark extras, kafkajs (Node.js) for its client
# tests. Re-running skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV=${TIDELAKE_VENV:-$ROOT/.venv}
PY=${PYTHON:-python3}

APT_PACKAGES=(openjdk-17-jre-headless openjdk-17-jdk-headless kcat libxerial-sqlite-jdbc-java libpostgresql-jdbc-java
              chromium chromium-driver
              python3-venv python3-dev build-essential git procps)

log() { printf '\033[1m[tidelake]\033[0m %s\n' "$*" >&2; }

install_system() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then return; fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  log "installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

install_python() {
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating virtualenv $VENV"
    "$PY" -m venv "$VENV"
  fi
  local stamp="$VENV/.tidelake-installed"
  local want
  # the C sources too: an editable install builds them once, so a changed one must reinstall
  want=$(cat pyproject.toml scripts/dev.sh ingest/protocol/*.c ingest/s3stream/wal/*.c | sha256sum | cut -d' ' -f1)
  # and the C module must be built in this checkout (a fresh clone next to an
  # existing venv has the stamp but not the module)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
    "$VENV/bin/python" -c "import ingest.protocol._recordscan, ingest.s3stream.wal._groupcommit" 2>/dev/null; then
    return
  fi
  log "installing Python packages into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
  "$VENV/bin/python" -m pip install -q -e ".[test,spark]"
  # hadoop-aws and the AWS SDK bundle for Spark's s3a://, shipped in this sdist;
  # --no-deps because its declared pyspark pin would replace ours.
  "$VENV/bin/python" -m pip install -q --no-deps "sagemaker-pyspark==1.4.5"
  echo "$want" > "$stamp"
}

# kafkajs (pinned in tests/integration/broker/kafkajs/package.json) for the
# kafkajs transaction tests, in .cache/kafkajs (git-ignored). Node.js from
# Debian when there is none.
install_kafkajs() {
  if ! command -v npm >/dev/null 2>&1; then
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    log "installing Node.js and npm (Debian packages nodejs npm)"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
  local src="$ROOT/tests/integration/broker/kafkajs/package.json" dir="$ROOT/.cache/kafkajs"
  if cmp -s "$src" "$dir/package.json" && [ -f "$dir/node_modules/kafkajs/package.json" ]; then return; fi
  log "installing kafkajs into $dir"
  mkdir -p "$dir"
  cp "$src" "$dir/package.json"
  (cd "$dir" && npm install --no-audit --no-fund --no-package-lock --loglevel=error >/dev/null)
}

install_all() {
  install_system
  install_python
  install_kafkajs
}

cmd=${1:-}
shift || true
case "$cmd" in
  install)
    install_all
    ;;
  start)
    install_all
    exec "$VENV/bin/tidelake" serve "$@"
    ;;
  test)
    install_all
    export PATH="$VENV/bin:$PATH"
    log "lint: ruff"
    "$VENV/bin/ruff" check ingest table_topic schema_registry catalog spark api tests bench
    log "architecture: import rules"
    "$VENV/bin/lint-imports"
    log "types: mypy --strict"
    "$VENV/bin/mypy" ingest schema_registry catalog table_topic api spark
    if [ $# -gt 0 ]; then  # a subset, or options of your own: one pytest process
      log "tests: pytest $*"
      exec "$VENV/bin/python" -m pytest -q "$@"
    fi
    # The suite waits on brokers, clients and JVMs more than it computes, so it
    # runs in TIDELAKE_TEST_WORKERS processes (pytest-xdist, a test file per
    # worker at a time); then, in one process, the modules marked one_process.
    workers=${TIDELAKE_TEST_WORKERS:-2}
    log "tests: $workers worker processes"
    parallel=0 single=0
    "$VENV/bin/python" -m pytest -q -n "$workers" --dist loadfile -m "not one_process" || parallel=$?
    log "tests: single-process phase (one_process)"
    "$VENV/bin/python" -m pytest -q -p no:xdist -m one_process || single=$?
    [ "$parallel" -eq 0 ] || exit "$parallel"
    exit "$single"
    ;;
  *)
    echo "usage: scripts/dev.sh start|test|install [args...]" >&2
    exit 2
    ;;
esac
