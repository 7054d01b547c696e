"""The images: a Debian base made with debootstrap (no registry is reachable), then the five images
of docker/ built with Docker's layer cache.

The build context is assembled in build/deploy/context/: the project's wheel, its locked
dependencies as requirements.txt plus a wheelhouse (built once on this host with pip, whose cache
makes later runs fast; `pip install --no-index` in the image then downloads nothing), the Kafka jars
(fetched from Maven Central by the project's own runtime, the same jars the tests run) and the
Dockerfiles' helper files. Hard links keep copying cheap.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from eosmirror_tools.deploy.shell import DeployError, log, run

REPO = Path(__file__).resolve().parents[3]
DOCKER_DIR = REPO / "docker"
UV = REPO / "var" / "tools" / "uv" / "bin" / "uv"
PIP = REPO / "var" / "tools" / "uv" / "bin" / "pip"
BASE_IMAGE = "eosmirror-base:bookworm"
# (image name, folder under docker/) in build order; eosmirror is the big one.
IMAGES = (("eosmirror-kafka", "kafka"), ("eosmirror-postgres", "postgres"), ("eosmirror-redis", "redis"),
          ("eosmirror-prometheus", "prometheus"), ("eosmirror", "eosmirror"))


def image_exists(name: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", name], capture_output=True).returncode == 0


def apt_mirror() -> str:
    """The Debian mirror this machine's own apt sources use (never written into the repository)."""
    texts = []
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        if path.is_file():
            texts.append(path.read_text(errors="replace"))
    text = "\n".join(texts)
    # deb822 (URIs: ...) and one-line (deb URL bookworm main) formats; the main archive, not security.
    for match in re.finditer(r"(?m)^(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(\S+)(.*)$", text):
        url = match.group(1).rstrip("/")
        if url.endswith("/debian") and "security" not in url:
            return url
    raise DeployError("no Debian mirror (a URL ending in /debian) found in /etc/apt/sources.list*")


def ensure_base_image() -> float:
    """debootstrap a minimal bookworm and import it, unless the image exists. Returns seconds spent."""
    if image_exists(BASE_IMAGE):
        return 0.0
    started = time.monotonic()
    mirror = apt_mirror()
    rootfs = Path(tempfile.mkdtemp(prefix="eosmirror-rootfs-"))
    try:
        log.info("debootstrap bookworm from the machine's apt mirror into %s", rootfs)
        run(["debootstrap", "--variant=minbase", "bookworm", str(rootfs), mirror], "debootstrap", 1200)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(["docker", "import", "-", BASE_IMAGE], stdin=tar.stdout, capture_output=True)
        tar.wait()
        if imported.returncode != 0 or tar.returncode != 0:
            raise DeployError(f"docker import failed: {imported.stderr.decode(errors='replace')[-2000:]}")
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)
    return time.monotonic() - started


def _uv_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_PROJECT", "VIRTUAL_ENV"))}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    return env


def _link_tree(source: Path, target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, copy_function=os.link)


def _requirements(context: Path) -> Path:
    out = context / "requirements.txt"
    run([str(UV), "export", "--frozen", "--no-dev", "--extra", "deploy", "--no-hashes", "--no-emit-project",
         "--no-header", "--project", str(REPO), "-o", str(out)], "uv export", 120, _uv_env())
    return out


def _wheelhouse(requirements: Path, cache: Path) -> Path:
    """A wheel per locked requirement, rebuilt only when requirements.txt changed (pip's own cache
    makes a rebuild download nothing new)."""
    # This host's Python may be a newer 3.11.x than Debian's 3.11.2 in the image: requirements whose
    # marker tests the patch version (backports such as async-timeout) are fetched either way.
    wanted = re.sub(r";\s*python_full_version\s*<\s*'3\.11\.\d+'", "", requirements.read_text())
    stamp = cache / ".requirements.txt"
    if stamp.exists() and stamp.read_text() == wanted:
        return cache
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    log.info("building the wheelhouse (%d requirements) in %s", wanted.count("=="), cache)
    for_image = cache.parent / "requirements-wheelhouse.txt"
    for_image.write_text(wanted)
    run([str(PIP), "wheel", "--quiet", "--disable-pip-version-check", "--no-deps", "--wheel-dir", str(cache),
         "-r", str(for_image)], "pip wheel (the image's wheelhouse)", 1800)
    stamp.write_text(wanted)
    return cache


def _project_wheel(context: Path) -> Path:
    dist = context / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    run([str(UV), "build", "--wheel", "--out-dir", str(dist), str(REPO)], "uv build --wheel", 300, _uv_env())
    for extra in dist.iterdir():
        if not extra.name.endswith(".whl"):
            extra.unlink()      # uv writes a .gitignore beside the wheel
    return next(dist.glob("eosmirror-*.whl"))


def assemble_context(build_dir: Path) -> Path:
    """build/deploy/context: everything the Dockerfiles COPY."""
    from eosmirror_tools.kit import runtime

    context = build_dir / "context"
    context.mkdir(parents=True, exist_ok=True)
    requirements = _requirements(context)
    _link_tree(_wheelhouse(requirements, build_dir / "wheelhouse"), context / "wheelhouse")
    _project_wheel(context)
    _link_tree(runtime.ensure_kafka_lib(), context / "kafka-lib")
    for _, folder in IMAGES:
        shutil.rmtree(context / folder, ignore_errors=True)
        shutil.copytree(DOCKER_DIR / folder, context / folder)
    return context


def build_images(context: Path, tag: str = "latest") -> dict[str, float]:
    """docker build of each image on the debootstrap base; seconds per image."""
    seconds = {}
    for name, folder in IMAGES:
        started = time.monotonic()
        log.info("docker build %s:%s", name, tag)
        run(["docker", "build", "--force-rm", "--build-arg", f"BASE_IMAGE={BASE_IMAGE}", "-t", f"{name}:{tag}",
             "-f", str(context / folder / "Dockerfile"), str(context)], f"docker build {name}", 2400)
        seconds[name] = round(time.monotonic() - started, 1)
    return seconds
