"""Java tools resolved from Maven Central into the user's cache: Apache Maven itself, and the
jars of a tool (Cassandra's server, DSBulk) with their runtime dependencies, described by a pom
shipped in this package."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tarfile
import urllib.request
from importlib import resources
from pathlib import Path

from mqforensics.errors import ServiceStartError
from mqforensics.services.cache import cache_dir

MAVEN_VERSION = "3.9.9"
MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2"


def maven() -> str:
    """`mvn` from PATH, or Apache Maven itself fetched from Maven Central into the cache."""
    found = shutil.which("mvn")
    if found:
        return found
    home = cache_dir(f"apache-maven-{MAVEN_VERSION}")
    mvn = home / f"apache-maven-{MAVEN_VERSION}" / "bin" / "mvn"
    if mvn.exists():
        return str(mvn)
    base = f"{MAVEN_CENTRAL}/org/apache/maven/apache-maven/{MAVEN_VERSION}"
    name = f"apache-maven-{MAVEN_VERSION}-bin.tar.gz"
    archive = home / name
    urllib.request.urlretrieve(f"{base}/{name}", archive)
    with urllib.request.urlopen(f"{base}/{name}.sha512") as response:
        expected = response.read().decode().split()[0]
    if hashlib.sha512(archive.read_bytes()).hexdigest() != expected:
        archive.unlink()
        raise ServiceStartError(f"checksum mismatch for {base}/{name}")
    with tarfile.open(archive) as tar:
        tar.extractall(home, filter="data")
    archive.unlink()
    mvn.chmod(0o755)
    return str(mvn)


def fetch_jars(
    name: str, pom_resource: str, properties: dict[str, str], expect: str, what: str
) -> Path:
    """The cache directory ``<name>/lib`` holding the jars `pom_resource` (a pom of this
    package) depends on at runtime, resolved on first use with `properties` (``-Dkey=value``);
    `expect` is a glob one of them must match, `what` names the tool in an error."""
    lib = cache_dir(name) / "lib"
    marker = lib / ".complete"
    if marker.exists():
        return lib
    shutil.rmtree(lib, ignore_errors=True)
    pom = lib.parent / "pom.xml"
    pom.write_bytes(resources.files(__package__).joinpath(pom_resource).read_bytes())
    command = [
        maven(),
        "-B",
        "-q",
        "-f",
        str(pom),
        *(f"-D{key}={value}" for key, value in properties.items()),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={lib}",
        "-DincludeScope=runtime",
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0 or not any(lib.glob(expect)):
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-15:])
        raise ServiceStartError(f"could not fetch {what} from Maven Central:\n{tail}")
    marker.write_text(" ".join(properties.values()))
    return lib
