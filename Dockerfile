FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md tasks.py ./
COPY timmy_compactor ./timmy_compactor
COPY config ./config
RUN pip install --no-cache-dir .
# The state volume's mount point: world-writable with the sticky bit, like /tmp, so the containers can
# run as any user (compose's `user:`, your UID). A named volume starts as a copy of it; the sidecar
# keeps its state in a folder of its own inside (TIMMY_STATE_DIR), created 0700 by the run user.
RUN mkdir -p /state && chmod 1777 /state
ENV HERMES_HOME=/hermes TIMMY_STATE_DIR=/state/timmy-compactor
CMD ["timmy-compactor", "--help"]
