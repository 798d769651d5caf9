# The Workload service image (SPEC §18; docs/deploy.md): `workload serve`, `workload migrate`
# and `workload worker` from one image.
#
#   docker build -t workload:0.1.0 .        (or: podman build -t workload:0.1.0 .)
#   docker run --rm -p 127.0.0.1:8080:8080 \
#     -e WORKLOAD_DATABASE_URL=postgresql://... -e WORKLOAD_OPERATOR_TOKENS=... workload:0.1.0
#
# Two stages: `build` installs the locked dependencies and the workspace's packages (not
# editable) into a virtual environment at /opt/workload; `runtime` is the same slim Python
# image with that environment alone, run as an unprivileged user. The base images are build
# arguments: a mirror, or a base of your own with Python 3.11 at the same path in both stages.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.13.9

FROM ${UV_IMAGE} AS uv

FROM ${PYTHON_IMAGE} AS build
COPY --from=uv /uv /usr/local/bin/uv
# Bytecode compiled at build time: a read-only root and PYTHONDONTWRITEBYTECODE would otherwise
# make every start compile the imports again (docs/operations.md). The base image's CA store is
# trusted, so a build behind a proxy with its own CA works once that CA is in the store.
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_SYSTEM_CERTS=1 \
    UV_PROJECT_ENVIRONMENT=/opt/workload
WORKDIR /src
COPY pyproject.toml uv.lock ./
COPY packages ./packages
# Exactly the lock's versions (--frozen), no development tools (--no-dev), the workspace's
# packages installed as wheels (--no-editable): /opt/workload needs nothing from /src.
RUN uv sync --frozen --no-dev --no-editable --no-cache --python python3

FROM ${PYTHON_IMAGE} AS runtime
ARG WORKLOAD_VERSION=0.1.0
LABEL org.opencontainers.image.title="Workload" \
      org.opencontainers.image.description="A control plane for AI workloads: workflows, agents and workers on PostgreSQL" \
      org.opencontainers.image.version="${WORKLOAD_VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/workload-dev/workload" \
      org.opencontainers.image.url="https://github.com/workload-dev/workload" \
      org.opencontainers.image.documentation="https://github.com/workload-dev/workload/blob/main/docs/deploy.md"
# A fixed numeric id, so that Kubernetes' runAsNonRoot can check it; a home and a data
# directory of its own (the embedded PostgreSQL of a development `serve` lives there).
RUN useradd --uid 10001 --user-group --no-log-init --create-home \
        --home-dir /var/lib/workload --shell /usr/sbin/nologin workload
COPY --from=build /opt/workload /opt/workload
ENV PATH=/opt/workload/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    WORKLOAD_DATA_DIR=/var/lib/workload/data
USER 10001:10001
WORKDIR /var/lib/workload
EXPOSE 8080
# /readyz answers 200 once the service serves, 503 while starting, stopping or failed: urlopen
# raises on anything but 2xx. It follows WORKLOAD_PORT. (A worker or a migration run from
# this image serves no HTTP: compose and Kubernetes turn this check off for them.)
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/readyz' % os.environ.get('WORKLOAD_PORT', '8080'), timeout=2)"]
CMD ["workload", "serve", "--host", "0.0.0.0"]
