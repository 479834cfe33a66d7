"""What kafka-python logs when a broker refuses its credentials."""

from __future__ import annotations

_REFUSED = "[Error 58] SaslAuthenticationFailedError"
# the client's own bootstrap deadline, ending an attempt the broker had not answered yet
_CUT_OFF = ("KafkaTimeoutError", "Connection timed out")


def assert_every_answered_attempt_refused(attempts: list[str]) -> None:
    """Every bootstrap attempt the broker answered was refused with error 58;
    only the last may instead be cut off by the client's own deadline."""
    assert attempts, "no bootstrap attempt was logged"
    *answered, last = attempts
    if any(cut in last for cut in _CUT_OFF):
        assert answered, attempts  # at least one attempt was answered
    else:
        answered.append(last)
    assert all(_REFUSED in m for m in answered), attempts
