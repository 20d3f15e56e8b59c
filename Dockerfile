# syntax=docker/dockerfile:1
# carbonshift: the admission webhook and scheduler API in a slim, non-root image.
# The root filesystem can be read-only: nothing is written at run time (certificates
# and config are mounted, bytecode is not cached).

FROM python:3.11.14-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY webhook ./webhook
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11.14-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /wheels
RUN pip install --no-compile --no-index /wheels/*.whl \
    && rm -rf /wheels \
    && useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin carbonshift
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["carbonshift"]
CMD ["serve", "--config", "/etc/carbonshift/config.yaml", "--cert-dir", "/etc/carbonshift/certs"]
