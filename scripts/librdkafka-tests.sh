#!/usr/bin/env bash
# librdkafka's own regression tests against a Tidelake broker.
#
#   scripts/librdkafka-tests.sh SRC [TESTS]
#
# SRC is a librdkafka source tree (a clone or release tarball of
# github.com/confluentinc/librdkafka, 2.x); it is built there on first use
# (./configure, make libs, tests/test-runner: a few minutes, gcc and
# libssl-dev). TESTS is librdkafka's comma-separated test list, by default the
# transaction and compaction tests that run against one broker:
#   0103  transactions (producer, consume-transform-produce, fencing, empty
#         transactions, watermarks under isolation levels, abort markers)
#   0129  fetching a topic that holds an aborted transaction
#   0077  compacted topics (latest value per key, tombstones, codecs)
# The broker starts on its embedded defaults in a temporary directory, on free
# ports, and is stopped at the end; its log is kept if a test fails. The
# test harness creates topics with Kafka's kafka-topics.sh, which is stood in
# for by `tidelake topics create` (scripts/kafka-shim). Run scripts/dev.sh
# install first. Not part of `scripts/dev.sh test`: it needs librdkafka's
# sources, which the CI machine does not have.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${TIDELAKE_VENV:-$ROOT/.venv}
SRC=$(cd "${1:?usage: scripts/librdkafka-tests.sh LIBRDKAFKA_SRC [TESTS]}" && pwd)
TESTS=${2:-0103,0129,0077}
# The Kafka version the harness assumes the broker speaks (it gates tests on it).
export TEST_KAFKA_VERSION=${TEST_KAFKA_VERSION:-3.9.0}

if [ ! -x "$SRC/tests/test-runner" ]; then
  echo "building librdkafka and its test runner in $SRC"
  (cd "$SRC" && ./configure --disable-gssapi --disable-curl >/dev/null \
    && make -j"$(nproc)" libs >/dev/null && make -C tests -j"$(nproc)" test-runner >/dev/null)
fi

WORK=$(mktemp -d /tmp/tidelake-rdkafka.XXXXXX)
read -r KAFKA HTTP REGISTRY < <("$VENV/bin/python" - <<'EOF'
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
EOF
)
BOOTSTRAP=127.0.0.1:$KAFKA

"$VENV/bin/tidelake" serve --data-dir "$WORK/data" --kafka-listen "$BOOTSTRAP" \
  --http-listen "127.0.0.1:$HTTP" --registry-listen "127.0.0.1:$REGISTRY" \
  >"$WORK/broker.log" 2>&1 &
BROKER=$!
stop() { kill "$BROKER" 2>/dev/null && wait "$BROKER" 2>/dev/null || true; }
trap stop EXIT
for _ in $(seq 1 120); do
  grep -q "tidelake ready" "$WORK/broker.log" 2>/dev/null && break
  kill -0 "$BROKER" 2>/dev/null || { tail -20 "$WORK/broker.log"; exit 1; }
  sleep 0.5
done

cat >"$WORK/test.conf" <<EOF
bootstrap.servers=$BOOTSTRAP
test.topic.random=true
EOF

set +e
(
  cd "$SRC/tests"
  export TESTS RDKAFKA_TEST_CONF="$WORK/test.conf" BROKERS="$BOOTSTRAP"
  export KAFKA_PATH="$ROOT/scripts/kafka-shim" TIDELAKE_BIN="$VENV/bin/tidelake"
  export LD_LIBRARY_PATH="$SRC/src:$SRC/src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  ./test-runner
) 2>&1 | tee "$WORK/tests.log"
status=${PIPESTATUS[0]}
set -e
grep -E "TESTS? (PASSED|FAILED)|^\[.*(PASSED|FAILED)" "$WORK/tests.log" | tail -20 || true
if [ "$status" = 0 ]; then
  rm -rf "$WORK"
else
  echo "a test failed; the broker's log and the tests' output are in $WORK" >&2
fi
exit "$status"
