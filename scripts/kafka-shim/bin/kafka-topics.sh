#!/usr/bin/env bash
# Kafka's kafka-topics.sh, as librdkafka's test harness calls it
# (--bootstrap-server B --create --topic T --partitions N
# --replication-factor R --config K=V ...), answered by `tidelake topics`.
# Used by scripts/librdkafka-tests.sh; only --create is needed there.
set -euo pipefail
TIDELAKE=${TIDELAKE_BIN:-tidelake}
bootstrap= topic= partitions=1 action= configs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bootstrap-server) bootstrap=$2; shift 2 ;;
    --create) action=create; shift ;;
    --topic) topic=$2; shift 2 ;;
    --partitions) partitions=$2; shift 2 ;;
    --replication-factor) shift 2 ;;  # storage is shared: one replica is enough
    --config) configs+=(--config "$2"); shift 2 ;;
    *) echo "kafka-topics shim: unsupported argument $1" >&2; exit 2 ;;
  esac
done
[ "$action" = create ] || { echo "kafka-topics shim: only --create is supported" >&2; exit 2; }
exec "$TIDELAKE" topics --bootstrap-server "$bootstrap" create "$topic" \
  --partitions "$partitions" "${configs[@]}"
