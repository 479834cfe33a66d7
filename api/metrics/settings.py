"""The ``[metrics]`` section (env prefix ``TIDELAKE_METRICS_``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["MetricsSettings"]


class MetricsSettings(BaseModel):
    """Metrics and the console's series over time."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    history_interval_s: float = Field(
        default=5.0,
        gt=0,
        le=3600,
        description="how often the console samples lag, freshness, rows/s and bytes/s",
    )
    history_samples: int = Field(
        default=720, ge=2, description="samples the console keeps per series (memory only)"
    )
    otlp_endpoint: str | None = Field(
        default=None,
        description="push every metric over OTLP/HTTP (protobuf) to <endpoint>/v1/metrics",
    )
    otlp_interval_s: float = Field(default=30.0, gt=0, description="seconds between OTLP pushes")

    @field_validator("otlp_endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"otlp_endpoint {value!r}: expected an http:// or https:// URL")
        return value.rstrip("/") if value else value
