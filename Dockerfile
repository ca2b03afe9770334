# syntax=docker/dockerfile:1
# The one image every tributary component runs from: binlog-pump, binlog-drainer, binlog-tso,
# binlogctl, reparo, binlog-workload and the Kubernetes operator
# (`kopf run -m binlog_operator.handlers`), and the Spark jobs' driver and executor pods. The
# helm chart and the operator's StatefulSets set the command; the default prints the pump's help.
#
#   docker build -t tributary:0.1.0 .
#
# scripts/k8s-image builds it with buildah and no network: BASE is a Debian bookworm made by
# debootstrap that already has python3 and the JRE, and the dependencies come as wheels from a
# directory mounted at /wheels (PIP_NO_INDEX=1, PIP_FIND_LINKS=/wheels). The layers go from the
# slowest-changing to the fastest: a change of code alone rebuilds only the last two.
ARG BASE=python:3.11-slim
FROM ${BASE}
ARG PIP_NO_INDEX=
ARG PIP_FIND_LINKS=
LABEL org.opencontainers.image.title="tributary" \
      org.opencontainers.image.description="Change-data replication wire-compatible with TiDB Binlog" \
      org.opencontainers.image.licenses="Apache-2.0"
# Java and the MariaDB JDBC driver for the Spark jobs (services/spark), unless the base has them;
# the jar sits where services.spark.k8s.IMAGE_JAR says the cluster's driver and executors find it.
RUN if ! command -v java >/dev/null || [ ! -e /usr/share/java/mariadb-java-client.jar ]; then \
        apt-get update \
     && apt-get install -y --no-install-recommends default-jre-headless libmariadb-java \
     && rm -rf /var/lib/apt/lists/*; \
    fi \
 && mkdir -p /opt/tributary/jars \
 && ln -s /usr/share/java/mariadb-java-client.jar /opt/tributary/jars/mariadb-java-client.jar \
 && useradd --uid 10001 --create-home --home-dir /var/lib/binlog binlog
# The dependencies first (they change with pyproject.toml only), then the project itself.
COPY pyproject.toml scripts/image-requirements /tmp/tributary/
RUN python3 -m venv /opt/tributary/venv \
 && python3 /tmp/tributary/image-requirements /tmp/tributary/pyproject.toml \
    >/tmp/tributary/requirements.txt \
 && /opt/tributary/venv/bin/pip install --no-cache-dir -q -r /tmp/tributary/requirements.txt
COPY scripts/image-entrypoint /usr/local/bin/tributary-entrypoint
COPY . /tmp/tributary/src
RUN /opt/tributary/venv/bin/pip install --no-cache-dir --no-deps --no-build-isolation -q \
        /tmp/tributary/src \
 && rm -rf /tmp/tributary \
 && ln -s "$(/opt/tributary/venv/bin/python -c \
        'import os, services.spark; print(os.path.dirname(services.spark.__file__))')" \
        /opt/tributary/spark-jobs
ENV PATH=/opt/tributary/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SPARK_JDBC_JAR=/opt/tributary/jars/mariadb-java-client.jar
USER 10001
WORKDIR /var/lib/binlog
# pump gRPC/HTTP, drainer gRPC/HTTP, capture HTTP, operator health
EXPOSE 8250 8251 8249 8252 8300 8080
# Spark on Kubernetes starts driver and executor pods from this image with the args `driver ...`
# or `executor`; the entrypoint runs those (scripts/image-entrypoint) and passes any other
# command through.
ENTRYPOINT ["/usr/local/bin/tributary-entrypoint"]
CMD ["binlog-pump", "--help"]
