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
