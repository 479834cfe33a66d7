"""A running platform with table topics on short intervals, and helpers to produce and read tables."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table

from tests.support.platform import TidelakeProcess

TT_ENV = {
    "TIDELAKE_TABLE_TOPIC_DEFAULT_COMMIT_INTERVAL_MS": "1000",
    "TIDELAKE_TABLE_TOPIC_RETRY_BACKOFF_MS": "200",
    "TIDELAKE_LOG_LEVEL": "DEBUG",
}


def table_catalog(data_dir: Path) -> SqlCatalog:
    return SqlCatalog(
        "tidelake",
        uri=f"sqlite:///{(data_dir.resolve() / 'catalog.db').as_posix()}",
        warehouse=(data_dir.resolve() / "warehouse").as_uri(),
    )


class TableTopics:
    """Test helpers over one running platform."""

    def __init__(self, proc: TidelakeProcess) -> None:
        self.proc = proc
        self.admin = AdminClient({"bootstrap.servers": proc.bootstrap})

    def create_topic(self, name: str, partitions: int = 1, **configs: str) -> None:
        cfg = {"table.topic.enable": "true", "table.topic.commit.interval.ms": "1000", **configs}
        futs = self.admin.create_topics([NewTopic(name, partitions, 1, config=cfg)])
        for f in futs.values():
            f.result(30)

    def alter(self, name: str, **configs: str) -> None:
        from confluent_kafka.admin import ConfigResource

        res = ConfigResource(ConfigResource.Type.TOPIC, name, set_config=configs)
        for f in self.admin.alter_configs([res]).values():
            f.result(30)

    def producer(self, **extra: Any) -> Producer:
        return Producer({"bootstrap.servers": self.proc.bootstrap, "linger.ms": 5, **extra})

    def produce(
        self,
        topic: str,
        records: list[tuple[bytes | None, bytes | None]],
        partition: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        p = self.producer()
        errors: list[Any] = []

        def done(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(err)

        for k, v in records:
            kwargs: dict[str, Any] = {"key": k, "value": v, "on_delivery": done}
            if partition is not None:
                kwargs["partition"] = partition
            if headers:
                kwargs["headers"] = headers
            p.produce(topic, **kwargs)
            p.poll(0)
        assert p.flush(30) == 0
        assert not errors, errors

    def catalog(self) -> SqlCatalog:
        return table_catalog(self.proc.data_dir)

    def table(self, name: str, namespace: str = "default") -> Table:
        return self.catalog().load_table((namespace, name.replace(".", "_").replace("-", "_")))

    def wait_rows(
        self,
        name: str,
        count: int,
        timeout: float = 30.0,
        namespace: str = "default",
        check: Callable[[pa.Table], bool] | None = None,
    ) -> pa.Table:
        deadline = time.monotonic() + timeout
        last: pa.Table | None = None
        while time.monotonic() < deadline:
            try:
                last = self.table(name, namespace).scan().to_arrow()
                if last.num_rows >= count and (check is None or check(last)):
                    return last
            except NoSuchTableError:
                pass
            time.sleep(0.3)
        got = None if last is None else last.num_rows
        raise AssertionError(f"{name}: wanted {count} rows, have {got}\n{self.proc.log_tail()}")


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidelakeProcess]:
    proc = TidelakeProcess(Path(tmp_path_factory.mktemp("tabletopic")) / "data", env=dict(TT_ENV))
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def tt(platform: TidelakeProcess) -> TableTopics:
    return TableTopics(platform)
