def scan(
    data: bytes | bytearray | memoryview,
    pos: int,
    index: int,
    count: int,
    base_ts: int,
    lo: int,
    hi: int,
    /,
) -> tuple[int, int, int, int, int] | None: ...
def starts(data: bytes | bytearray | memoryview, count: int, /) -> bytes: ...
def gather(
    data: bytes | bytearray | memoryview,
    starts: bytes | bytearray | memoryview,
    lengths: bytes | bytearray | memoryview,
    /,
) -> bytes: ...
def fields(
    data: bytes | bytearray | memoryview, starts: bytes | bytearray | memoryview, /
) -> bytes | None: ...
def varint_sizes(
    values: bytes | bytearray | memoryview, out: bytearray | memoryview, zigzag: bool, /
) -> None: ...
