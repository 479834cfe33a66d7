#!/usr/bin/env bash
# A three-broker Tidelake cluster on this machine, for trying it out:
#   scripts/cluster.sh start   moto's S3 server on 127.0.0.1:9000, a PostgreSQL database
#                              "tidelake_cluster" on 127.0.0.1:5432, and brokers 1-3 with
#                              Kafka on 127.0.0.1:19091, :19092, :19093 (broker N: Kafka 1909N,
#                              registry 1808N, HTTP API 1818N)
#   scripts/cluster.sh stop    SIGTERM every broker (each hands its partitions over), then moto
#   scripts/cluster.sh kill N  kill -9 broker N (a crash: the others take its partitions)
#   scripts/cluster.sh add N   start broker N (4-9) and let it take a share of the partitions
# State and logs live in ./tidelake-cluster. Run scripts/dev.sh install first.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${TIDELAKE_VENV:-$(pwd)/.venv}
DIR=${CLUSTER_DIR:-$(pwd)/tidelake-cluster}
PG=${CLUSTER_PG:-postgresql://postgres@127.0.0.1:5432}
DB=tidelake_cluster
S3=http://127.0.0.1:9000

start_broker() {
  local n=$1
  mkdir -p "$DIR"
  TIDELAKE_METADATA_URL="$PG/$DB" \
  TIDELAKE_OBJECT_STORE_URL="s3://tidelake/cluster/" \
  TIDELAKE_S3_ENDPOINT_URL="$S3" TIDELAKE_S3_REGION=us-east-1 \
  TIDELAKE_S3_ACCESS_KEY_ID=local TIDELAKE_S3_SECRET_ACCESS_KEY=local \
  TIDELAKE_STORAGE_WAL_KIND=object \
  TIDELAKE_BROKER_NODE_ID="$n" TIDELAKE_BROKER_RACK="rack-$(( (n + 1) % 2 ))" \
  nohup "$VENV/bin/tidelake" serve --data-dir "$DIR/node-$n" \
    --kafka-listen "127.0.0.1:1909$n" --registry-listen "127.0.0.1:1808$n" \
    --http-listen "127.0.0.1:1818$n" >"$DIR/node-$n.log" 2>&1 &
  echo $! >"$DIR/node-$n.pid"
  for _ in $(seq 1 120); do
    if grep -q "tidelake ready" "$DIR/node-$n.log" 2>/dev/null; then
      echo "broker $n: kafka 127.0.0.1:1909$n, http 127.0.0.1:1818$n (log $DIR/node-$n.log)"
      return
    fi
    kill -0 "$(cat "$DIR/node-$n.pid")" 2>/dev/null || { tail -20 "$DIR/node-$n.log"; exit 1; }
    sleep 0.5
  done
  echo "broker $n did not start; see $DIR/node-$n.log" >&2
  exit 1
}

case "${1:-}" in
  start)
    mkdir -p "$DIR"
    psql "$PG/postgres" -qc "CREATE DATABASE $DB" 2>/dev/null || true
    nohup "$VENV/bin/moto_server" -H 127.0.0.1 -p 9000 >"$DIR/moto.log" 2>&1 &
    echo $! >"$DIR/moto.pid"
    for _ in $(seq 1 60); do curl -sf "$S3/moto-api/" >/dev/null && break; sleep 0.5; done
    "$VENV/bin/python" -c "import boto3; boto3.client('s3', endpoint_url='$S3', region_name='us-east-1', aws_access_key_id='local', aws_secret_access_key='local').create_bucket(Bucket='tidelake')"
    for n in 1 2 3; do start_broker "$n"; done
    ;;
  add)
    start_broker "${2:?broker number}"
    ;;
  kill)
    kill -9 "$(cat "$DIR/node-${2:?broker number}.pid")"
    ;;
  stop)
    for pid in "$DIR"/node-*.pid; do
      [ -f "$pid" ] || continue
      kill -TERM "$(cat "$pid")" 2>/dev/null && while kill -0 "$(cat "$pid")" 2>/dev/null; do sleep 0.2; done
      rm -f "$pid"
    done
    [ -f "$DIR/moto.pid" ] && kill "$(cat "$DIR/moto.pid")" 2>/dev/null || true
    rm -f "$DIR/moto.pid"
    psql "$PG/postgres" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" 2>/dev/null || true
    rm -rf "$DIR"
    ;;
  *)
    echo "usage: scripts/cluster.sh start|stop|kill N|add N" >&2
    exit 2
    ;;
esac
