# syntax=docker/dockerfile:1
# carbonshift: the admission webhook and scheduler API in a slim, non-root image.
# The root filesystem can be read-only: nothing is written at run time (certificates
# and config are mounted, bytecode is not cached).
# Runtime dependencies come from requirements.lock (exact versions, verified hashes,
# wheels only; `make lock` regenerates it); carbonshift itself is installed without them,
# all into the virtualenv /opt/carbonshift.
#
# BASE is any Debian bookworm image with python3 (3.11) and its venv module: by default
# the official python image of the lock's Python (stage python-base); `make image`
# (hack/build-image.sh) builds one from Debian's own packages with mmdebstrap, and this
# same file with buildah and --build-arg BASE=<it>, where no registry can be reached.

ARG BASE=python-base

FROM python:3.11.14-slim-bookworm AS python-base

FROM ${BASE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY requirements.lock /tmp/requirements.lock
COPY pyproject.toml README.md ./
COPY webhook ./webhook
# Behind a TLS-intercepting proxy, pass its CA bundle as the build secret "ca"
# (--secret id=ca,src=FILE); it is mounted for this step only and never stored.
# redis needs async-timeout before Python 3.11.3 (Debian bookworm's python3 is 3.11.2);
# requirements.lock is resolved for 3.11.14 and does not list it, so it is added here.
RUN --mount=type=secret,id=ca,required=false \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
    && python3 -m venv /opt/carbonshift \
    && /opt/carbonshift/bin/pip install --no-compile --no-deps --require-hashes --only-binary :all: \
        -r /tmp/requirements.lock \
    && if python3 -c 'import sys; sys.exit(sys.version_info >= (3, 11, 3))'; then \
        echo 'async-timeout==5.0.1 --hash=sha256:39e3809566ff85354557ec2398b55e096c8364bacac9405a7a1fa429e77fe76c' \
            > /tmp/before-3.11.3.txt \
        && /opt/carbonshift/bin/pip install --no-compile --no-deps --require-hashes \
            --only-binary :all: -r /tmp/before-3.11.3.txt; \
    fi \
    && /opt/carbonshift/bin/pip wheel --no-deps --wheel-dir /wheels . \
    && /opt/carbonshift/bin/pip install --no-compile --no-deps --no-index /wheels/*.whl \
    && /opt/carbonshift/bin/pip check \
    && /opt/carbonshift/bin/pip uninstall --yes pip \
    && find /opt/carbonshift -depth -name __pycache__ -type d -exec rm -rf {} +

FROM ${BASE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/carbonshift/bin:$PATH
COPY --from=build /opt/carbonshift /opt/carbonshift
RUN useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin carbonshift
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["carbonshift"]
CMD ["serve", "--config", "/etc/carbonshift/config.yaml", "--cert-dir", "/etc/carbonshift/certs"]
