"""Spark for Tidelake: a SparkSession on the platform catalog, maintenance and catalog sync.

Spark runs as jobs (``tidelake maintenance``, ``tidelake sql``, ``spark-submit``); runtime
packages never import this one. It imports only ``catalog`` of ours.
"""

from spark.config import SparkSettings
from spark.errors import SparkJobError, SparkUnavailableError
from spark.session import create_spark_session, spark_catalog_conf, spark_submit_arguments

__all__ = [
    "SparkJobError",
    "SparkSettings",
    "SparkUnavailableError",
    "create_spark_session",
    "spark_catalog_conf",
    "spark_submit_arguments",
]
