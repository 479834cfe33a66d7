"""The console's JSON endpoints against the platform's own /openapi.json,
through schemathesis: generated requests (valid and invalid) never get a 5xx,
and every documented answer matches its schema. Bounded: a fixed number of
examples per operation and a fixed seed."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, seed, settings
from schemathesis import Case
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from tests.integration.api.console_data import SampleData

CONSOLE_PATHS = (
    r"^/api/v1/(topic-summaries|topics/\{name\}/(detail|messages)|groups(/\{group_id\})?"
    r"|schemas/subjects(/.*)?|history|cluster|storage|table-topics)$"
)


def test_console_endpoints_answer_generated_requests_as_documented(data: SampleData) -> None:
    schema = schemathesis.openapi.from_url(f"{data.platform.http_url}/openapi.json")
    operations = [
        result.ok()
        for result in schema.include(path_regex=CONSOLE_PATHS, method="GET").get_all_operations()
    ]
    assert len(operations) >= 10, [op.path for op in operations]
    for operation in operations:

        @given(case=operation.as_strategy())
        @seed(20261126)
        @settings(
            max_examples=12, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        def generated(case: Case) -> None:
            case.call_and_validate(checks=[not_a_server_error, response_schema_conformance])

        generated()
