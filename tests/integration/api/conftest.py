"""One platform with sample data for every console and metrics test here,
pushing its metrics over OTLP/HTTP to a small receiver the tests read."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from tests.integration.api.console_data import SampleData, load_sample_data
from tests.support.net import free_port
from tests.support.platform import TidelakeProcess


class OtlpReceiver:
    """Accepts OTLP/HTTP protobuf metric exports on ``/v1/metrics``."""

    def __init__(self) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []
        self.content_types: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path != "/v1/metrics":
                    self.send_response(404)
                    self.end_headers()
                    return
                request = ExportMetricsServiceRequest()
                request.ParseFromString(body)
                receiver.requests.append(request)
                receiver.content_types.append(self.headers.get("Content-Type", ""))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> OtlpReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@pytest.fixture(scope="package")
def otlp() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture(scope="package")
def data(tmp_path_factory: pytest.TempPathFactory, otlp: OtlpReceiver) -> Iterator[SampleData]:
    root: Path = tmp_path_factory.mktemp("console")
    platform = TidelakeProcess(
        root / "data",
        env={
            "TIDELAKE_METRICS_HISTORY_INTERVAL_S": "0.5",
            "TIDELAKE_METRICS_OTLP_ENDPOINT": otlp.endpoint,
            "TIDELAKE_METRICS_OTLP_INTERVAL_S": "1",
        },
    ).start()
    try:
        sample = load_sample_data(platform)
        try:
            yield sample
        finally:
            sample.close()
    finally:
        platform.stop()
