"""Table Topic: Kafka topics become Apache Iceberg (and/or Delta Lake) tables, exactly once.

Wiring (``api/process.py``)::

    settings = TableTopicSettings()                      # env TIDELAKE_TABLE_TOPIC_*
    register_table_topic_configs(broker.logs.configs, settings)   # before broker.start()
    service = TableTopicService(settings=settings, logs=broker.logs,
                                registry=RegistryService(store) or None, catalog=catalog)
    broker.add_listener(service)
    await broker.start(); await service.start()
    ...
    await service.stop(); await broker.stop()
    service.status()   # [{topic, table, state, lag, freshness_ms, rows_per_second, ...}]

Layout: ``config`` (topic configs, AutoMQ aliases), ``settings``, ``decode/``
(wire format, Avro/Protobuf/JSON Schema decoders, registry resolver),
``convert/`` (record batches -> Arrow: general and vectorised paths, conforming
to the table schema, optional process pool), ``evolution``, ``partitioning``,
``commit`` (the exactly-once commit protocol), ``worker`` (one per partition),
``coordinator`` (one per topic, one commit per interval), ``dlq``, ``status``,
``service``; ``sink`` (the ``TableSink`` interface: the Iceberg writer, the
Delta sink of ``delta/``, both at once for ``table.topic.format=both``, and an
in-memory one).

Table columns: ``_kafka_partition`` int, ``_kafka_offset`` long,
``_kafka_timestamp`` timestamptz, ``_kafka_key`` binary, ``_kafka_headers``
list<struct<key string, value binary>>; ``key`` when the key is converted;
``value`` (transform ``none``) or the record's fields (``flatten``), or the
Debezium after/before image plus ``_cdc_op`` (``flatten_debezium``).

Exactly once: each commit's snapshot summary carries ``tidelake.offsets``
(JSON {partition: next offset}, every partition) atomically with its data
files; workers resume from the newest snapshot carrying it. Delta tables carry
each partition's next offset in a ``txn`` action of the same log entry
(``table_topic.delta.sink``).
"""

from table_topic.config import register_table_topic_configs
from table_topic.errors import TableTopicError
from table_topic.service import TableTopicService
from table_topic.settings import TableTopicSettings

__all__ = [
    "TableTopicError",
    "TableTopicService",
    "TableTopicSettings",
    "register_table_topic_configs",
]
