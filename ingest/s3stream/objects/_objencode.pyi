from collections.abc import Sequence

from ingest.s3stream.api import StreamBatch

def data_section(
    ranges: Sequence[Sequence[StreamBatch]], reserve: int, /
) -> tuple[bytearray, list[tuple[int, int, int, int, int]]]: ...
def crc32c(data: bytes | bytearray | memoryview, software: bool = False, /) -> int: ...
