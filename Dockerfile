# syntax=docker/dockerfile:1
# carbonshift: the admission webhook and scheduler API in a slim, non-root image.
# The root filesystem can be read-only: nothing is written at run time (certificates
# and config are mounted, bytecode is not cached).
# Runtime dependencies come from requirements.lock (exact versions, verified hashes,
# wheels only; `make lock` regenerates it); carbonshift itself is installed without them.

FROM python:3.11.14-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY webhook ./webhook
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11.14-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements.lock /tmp/requirements.lock
RUN pip install --no-compile --no-deps --require-hashes --only-binary :all: \
        -r /tmp/requirements.lock \
    && rm /tmp/requirements.lock
COPY --from=build /wheels /wheels
RUN pip install --no-compile --no-deps --no-index /wheels/*.whl \
    && pip check \
    && rm -rf /wheels \
    && useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin carbonshift
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["carbonshift"]
CMD ["serve", "--config", "/etc/carbonshift/config.yaml", "--cert-dir", "/etc/carbonshift/certs"]
