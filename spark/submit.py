"""Entry point for ``spark-submit``: run table maintenance inside a submitted Spark app.

``tidelake maintenance submit-command`` prints the full command, for example::

    spark-submit --master spark://head:7077 --jars .../iceberg-spark-runtime-3.5_2.12-1.10.2.jar \\
        --driver-class-path /usr/share/java/sqlite-jdbc.jar --conf ... \\
        .../spark/submit.py --catalog-json '{"data_dir": "/srv/tidelake"}' --policy-json '{}'

The settings travel as JSON (``CatalogSettings`` and ``MaintenancePolicy``), so the
driver needs only the ``tidelake`` package, not the platform's config file. The
session spark-submit created is reused; its catalog settings are applied at run time.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    from catalog.config import CatalogSettings
    from catalog.factory import load_platform_catalog
    from spark.config import SparkSettings
    from spark.maintenance import run_maintenance
    from spark.policy import MaintenancePolicy
    from spark.session import create_spark_session, spark_catalog_name

    parser = argparse.ArgumentParser(prog="spark/submit.py")
    parser.add_argument("--catalog-json", required=True, help="CatalogSettings as JSON")
    parser.add_argument("--policy-json", default="{}", help="MaintenancePolicy as JSON")
    parser.add_argument("--spark-json", default="{}", help="SparkSettings as JSON")
    parser.add_argument("--table", action="append")
    parser.add_argument("--job", action="append")
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)

    catalog_settings = CatalogSettings.model_validate_json(args.catalog_json)
    policy = MaintenancePolicy.model_validate_json(args.policy_json)
    spark_settings = SparkSettings.model_validate_json(args.spark_json)
    session = create_spark_session(catalog_settings, spark_settings)
    report = run_maintenance(
        session,
        load_platform_catalog(catalog_settings),
        policy,
        catalog_name=spark_catalog_name(catalog_settings, spark_settings),
        tables=args.table,
        jobs=args.job,
        force=args.force,
    )
    for result in report.results:
        print(json.dumps(result.as_dict()))
    for table, job, message in report.errors:
        print(json.dumps({"table": table, "job": job, "error": message}))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
