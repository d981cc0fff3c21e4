# csibench operator image: slim Python, pinned dependencies, non-root, works with a read-only root filesystem.
# Build: docker build -t csibench/operator:0.1.0 .
FROM python:3.11.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN pip install --no-cache-dir build==1.2.2 \
    && python -m build --wheel --outdir /dist

FROM python:3.11.11-slim-bookworm
LABEL org.opencontainers.image.title="csibench" \
      org.opencontainers.image.description="Kubernetes operator that benchmarks CSI storage" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements.lock /tmp/requirements.lock
COPY --from=build /dist/*.whl /tmp/
RUN pip install --no-cache-dir -r /tmp/requirements.lock \
    && pip install --no-cache-dir --no-deps /tmp/*.whl \
    && rm -f /tmp/*.whl /tmp/requirements.lock
# 65532: the conventional "nonroot" UID; no home directory or shell needed.
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["csibench"]
CMD ["operator", "--metrics-port=8080", "--health-port=8081"]
