"""Find the jars a Tidelake Spark session needs in installed packages, without Maven.

* Iceberg's Spark runtime comes from the PyPI wheel ``snowpark-connect-deps-iceberg==1.0.2``
  (``iceberg-spark-runtime-3.5_2.12-1.10.2.jar``; release 1.0.3 ships a broken jar).
* The SQLite JDBC driver comes from Debian's ``libxerial-sqlite-jdbc-java``
  (``/usr/share/java/sqlite-jdbc.jar``); PostgreSQL's from ``libpostgresql-jdbc-java``.
* ``hadoop-aws`` and the AWS SDK bundle (for ``s3a://``) come from the PyPI sdist
  ``sagemaker-pyspark==1.4.5`` when it is installed.

``TIDELAKE_SPARK_JAR_DIRS`` (``os.pathsep``-separated) adds directories searched first.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from spark.errors import JarNotFoundError, SparkUnavailableError

__all__ = [
    "SparkJars",
    "discover_jars",
    "find_hadoop_aws_jars",
    "find_iceberg_runtime_jar",
    "find_jdbc_driver_jar",
    "require_java",
]

_ICEBERG_PATTERN = "iceberg-spark-runtime-3.5_2.12-*.jar"
_SYSTEM_JAR_DIRS = ("/usr/share/java",)
_JDBC_JARS = {
    "sqlite": ("sqlite-jdbc.jar", "xerial-sqlite-jdbc.jar", "sqlite-jdbc-*.jar"),
    "postgresql": ("postgresql.jar", "postgresql-*.jar"),
}
_INSTALL_HINT = "pip install 'pyspark==3.5.9' 'snowpark-connect-deps-iceberg==1.0.2'"


@dataclass(frozen=True)
class SparkJars:
    """Jars for ``spark.jars`` and for the driver's class path (JDBC drivers must be there)."""

    jars: tuple[str, ...] = ()
    driver_class_path: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=(), compare=False)


def _extra_dirs() -> list[Path]:
    raw = os.environ.get("TIDELAKE_SPARK_JAR_DIRS", "")
    return [Path(p) for p in raw.split(os.pathsep) if p]


def _package_dir(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _first_match(dirs: list[Path], patterns: tuple[str, ...]) -> str | None:
    for directory in dirs:
        for pattern in patterns:
            hits = sorted(glob.glob(str(directory / pattern)))
            if hits:
                return hits[-1]
    return None


def require_java() -> str:
    """The ``java`` executable Spark will use; raises :class:`SparkUnavailableError` if none."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise SparkUnavailableError(
            "Java is not installed: Spark 3.5 needs Java 17 (apt-get install openjdk-17-jre-headless)"
        )
    return found


def find_iceberg_runtime_jar() -> str:
    """Path of ``iceberg-spark-runtime-3.5_2.12-*.jar``."""
    dirs = _extra_dirs()
    pkg = _package_dir("snowpark_connect_deps_iceberg")
    if pkg is not None:
        dirs.append(pkg / "jars")
    hit = _first_match(dirs, (_ICEBERG_PATTERN,))
    if hit is None:
        raise JarNotFoundError(f"Iceberg's Spark runtime jar is not installed: {_INSTALL_HINT}")
    return hit


def find_jdbc_driver_jar(kind: str) -> str:
    """The JDBC driver jar for ``sqlite`` or ``postgresql``."""
    patterns = _JDBC_JARS.get(kind)
    if patterns is None:
        raise JarNotFoundError(f"no JDBC driver known for {kind!r}")
    hit = _first_match([*_extra_dirs(), *map(Path, _SYSTEM_JAR_DIRS)], patterns)
    if hit is None:
        package = "libxerial-sqlite-jdbc-java" if kind == "sqlite" else "libpostgresql-jdbc-java"
        raise JarNotFoundError(
            f"the {kind} JDBC driver jar is missing: apt-get install {package} "
            "(or put the jar in a directory named by TIDELAKE_SPARK_JAR_DIRS)"
        )
    return hit


def find_hadoop_aws_jars() -> list[str]:
    """``hadoop-aws`` and the AWS SDK v1 bundle, or ``[]`` when they are not installed."""
    dirs = _extra_dirs()
    pkg = _package_dir("sagemaker_pyspark")
    if pkg is not None:
        dirs.append(pkg / "jars")
    aws = _first_match(dirs, ("hadoop-aws-3.3.*.jar",))
    sdk = _first_match(dirs, ("aws-java-sdk-bundle-*.jar",))
    return [aws, sdk] if aws and sdk else []


def discover_jars(*, jdbc: str | None = None, s3a: bool = False) -> SparkJars:
    """Every jar a session needs: Iceberg always, a JDBC driver and s3a support on request."""
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise SparkUnavailableError(f"pyspark is not installed: {_INSTALL_HINT}") from exc
    jars = [find_iceberg_runtime_jar()]
    driver: list[str] = []
    notes: list[str] = []
    if jdbc is not None:
        driver.append(find_jdbc_driver_jar(jdbc))
    # Every other JDBC driver that is installed goes on the driver's class path too:
    # it is fixed when the JVM starts, and a Python process keeps one JVM for all of
    # its sessions (a later session may use another catalog database).
    for kind in _JDBC_JARS:
        if kind != jdbc:
            try:
                driver.append(find_jdbc_driver_jar(kind))
            except JarNotFoundError:
                pass
    aws = find_hadoop_aws_jars()
    # On the driver's class path whenever installed, for the same reason as the JDBC
    # drivers; shipped to executors (spark.jars) only when the catalog needs s3a.
    driver.extend(aws)
    if s3a:
        if aws:
            jars.extend(aws)
        else:
            notes.append(
                "hadoop-aws not found (pip install sagemaker-pyspark==1.4.5, or give "
                "spark.jars.packages=org.apache.hadoop:hadoop-aws:3.3.4): s3a:// will fail"
            )
    return SparkJars(tuple(jars), tuple(driver), tuple(notes))
