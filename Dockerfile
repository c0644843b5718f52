FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md tasks.py ./
COPY timmy_compactor ./timmy_compactor
COPY config ./config
RUN pip install --no-cache-dir .
ENV HERMES_HOME=/hermes TIMMY_STATE_DIR=/state
CMD ["timmy-compactor", "--help"]
