"""A throw-away PostgreSQL cluster for the tests: initdb in a temp dir, 127.0.0.1 on a free port, a password user.

`postgres_cluster()` installs Debian's server with ``scripts/install_postgres.sh`` if ``initdb`` is missing,
starts the cluster and yields its `PostgresCluster`; it is stopped (``pg_ctl stop -m immediate``) and deleted on
exit, also when the test fails. The server refuses to run as root, so under root the data folder belongs to
the ``postgres`` user and every server command runs through ``runuser``. Host connections need the password
(scram-sha-256): a test that passes proves the password really went through the storage URL.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class PostgresCluster:
    port: int
    user: str
    password: str
    database: str
    bin_dir: str
    data_dir: str
    socket_dir: str

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://{self.user}:{self.password}@127.0.0.1:{self.port}/{self.database}"

    def create_database(self, name: str) -> str:
        """A fresh database owned by the test user; returns its URL."""
        _run_as_server_user(
            [
                os.path.join(self.bin_dir, "createdb"),
                "-h",
                self.socket_dir,
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-O",
                self.user,
                name,
            ]
        )
        return f"postgresql+psycopg2://{self.user}:{self.password}@127.0.0.1:{self.port}/{name}"

    def create_user(self, user: str, password: str) -> None:
        """A login role ``user`` with ``password`` (any characters but a quote) owning a database named ``user``."""
        psql = [
            os.path.join(self.bin_dir, "psql"),
            "-h",
            self.socket_dir,
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            "postgres",
            "-c",
        ]
        _run_as_server_user([*psql, f"CREATE USER {user} WITH PASSWORD '{password}'"])
        _run_as_server_user(
            [
                os.path.join(self.bin_dir, "createdb"),
                "-h",
                self.socket_dir,
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-O",
                user,
                user,
            ]
        )


def _bin_dir() -> str:
    def find() -> str | None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
        if found:
            return os.path.dirname(found[-1])
        on_path = shutil.which("initdb")
        return os.path.dirname(os.path.realpath(on_path)) if on_path else None

    bin_dir = find()
    if bin_dir is None:
        subprocess.run(["bash", str(_ROOT / "scripts" / "install_postgres.sh")], check=True)
        bin_dir = find()
    if bin_dir is None:
        pytest.fail("PostgreSQL is not installed and scripts/install_postgres.sh could not install it.")
    return bin_dir


def _as_root() -> bool:
    return os.geteuid() == 0


def _run_as_server_user(command: list[str]) -> subprocess.CompletedProcess:
    prefix = ["runuser", "-u", "postgres", "--"] if _as_root() else []
    result = subprocess.run(prefix + command, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return result


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def postgres_cluster() -> Iterator[PostgresCluster]:
    bin_dir = _bin_dir()
    base = tempfile.mkdtemp(prefix="hpsearch-pg-")
    data_dir = os.path.join(base, "data")
    os.makedirs(data_dir)
    if _as_root():
        import pwd

        entry = pwd.getpwnam("postgres")
        os.chmod(base, 0o755)
        for path in (base, data_dir):
            os.chown(path, entry.pw_uid, entry.pw_gid)
        os.chmod(data_dir, 0o700)
    password = "pw-" + secrets.token_hex(12)
    cluster = PostgresCluster(
        port=_free_port(),
        user="hpsearch",
        password=password,
        database="hpsearch",
        bin_dir=bin_dir,
        data_dir=data_dir,
        socket_dir=base,
    )
    started = False
    try:
        _run_as_server_user(
            [
                os.path.join(bin_dir, "initdb"),
                "-D",
                data_dir,
                "-U",
                "postgres",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--no-sync",
            ]
        )
        options = (
            f"-c listen_addresses=127.0.0.1 -p {cluster.port} -k {base} -c fsync=off -c max_connections=60"
        )
        _run_as_server_user(
            [
                os.path.join(bin_dir, "pg_ctl"),
                "-D",
                data_dir,
                "-l",
                os.path.join(base, "log"),
                "-o",
                options,
                "-w",
                "-t",
                "60",
                "start",
            ]
        )
        started = True
        psql = [
            os.path.join(bin_dir, "psql"),
            "-h",
            base,
            "-p",
            str(cluster.port),
            "-U",
            "postgres",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            "postgres",
            "-c",
        ]
        _run_as_server_user([*psql, f"CREATE USER {cluster.user} WITH PASSWORD '{password}'"])
        _run_as_server_user([*psql, f"CREATE DATABASE {cluster.database} OWNER {cluster.user}"])
        yield cluster
    finally:
        if started:
            with contextlib.suppress(Exception):
                _run_as_server_user(
                    [os.path.join(bin_dir, "pg_ctl"), "-D", data_dir, "-m", "immediate", "stop"]
                )
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """A running throw-away cluster (session-wide); use ``postgres.url`` or ``postgres.create_database(name)``."""
    with postgres_cluster() as cluster:
        yield cluster
