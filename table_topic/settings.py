"""Process-level settings of the table topic service (env prefix ``TIDELAKE_TABLE_TOPIC_``)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["TableTopicSettings"]


class TableTopicSettings(BaseSettings):
    """Defaults and limits for every table topic in this process.

    Per-topic behaviour is set with topic configs (``table.topic.*``); these are
    the process-wide knobs: defaults for those configs and resource bounds.
    """

    model_config = SettingsConfigDict(env_prefix="TIDELAKE_TABLE_TOPIC_", extra="ignore")

    enabled: bool = True  # the service runs at all (topics still need table.topic.enable)
    default_commit_interval_ms: int = Field(60_000, ge=1000)
    default_namespace: str = "default"
    max_rows_per_commit: int = Field(1_000_000, ge=1)  # a backlog commits in chunks this big
    max_rows_per_chunk: int = Field(200_000, ge=1)  # one worker conversion step
    max_bytes_per_chunk: int = Field(32 * 1024 * 1024, ge=1024)
    target_file_size_bytes: int = Field(512 * 1024 * 1024, ge=1024)
    worker_threads: int = Field(
        3, ge=1
    )  # conversion (numpy/polars/pyarrow release the GIL) + commits
    # >0: convert chunks in this many worker processes (per-record Python work
    # scales with cores); 0: in the worker threads.
    convert_processes: int = Field(0, ge=0)
    retry_backoff_ms: int = Field(2000, ge=10)
    # Delta tables (table.topic.format=delta|both): the root they live under
    # (file:///..., s3://bucket/prefix; empty: ``<catalog warehouse>/delta``), and
    # delta-rs storage options (AWS_ENDPOINT_URL, ...; empty: derived from the
    # catalog's s3.* FileIO properties). A table is <root>/<namespace>/<table>.
    delta_location: str = ""
    delta_storage_options: dict[str, str] = Field(default_factory=dict)
    # Crash tests only: exit the process (as kill -9 would) at this point of the
    # N-th commit: "before_commit" (dead letters written, nothing committed),
    # "files_written" (data files written, catalog not updated), "after_commit".
    fault_point: str = ""
    fault_after_commits: int = 1
