# syntax=docker/dockerfile:1
# The one image every tributary component runs from: binlog-pump, binlog-drainer, binlog-tso,
# binlogctl, reparo, binlog-workload and the Kubernetes operator
# (`kopf run -m binlog_operator.handlers`), and the Spark jobs' driver and executor pods. The
# helm chart and the operator's StatefulSets set the command; the default prints the pump's help.
ARG PYTHON=3.11

FROM python:${PYTHON}-slim AS build
WORKDIR /src
RUN python -m venv /opt/tributary
ENV PATH=/opt/tributary/bin:$PATH
COPY . .
RUN pip install --no-cache-dir .

FROM python:${PYTHON}-slim
LABEL org.opencontainers.image.title="tributary" \
      org.opencontainers.image.description="Change-data replication wire-compatible with TiDB Binlog" \
      org.opencontainers.image.licenses="Apache-2.0"
# Java and the MariaDB JDBC driver for the Spark jobs (services/spark); the jar sits where
# services.spark.k8s.IMAGE_JAR says the cluster's driver and executors find it.
RUN apt-get update \
 && apt-get install -y --no-install-recommends default-jre-headless libmariadb-java \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /opt/tributary/jars \
 && ln -s /usr/share/java/mariadb-java-client.jar /opt/tributary/jars/mariadb-java-client.jar
COPY --from=build /opt/tributary /opt/tributary
# the source tree, for spark-submit's primary resource (services.spark.k8s.APP_ROOT)
COPY --from=build /src /app
# binlog_operator lives in operator/ (a folder: `operator` is a standard-library module)
COPY operator/binlog_operator /opt/tributary-operator/binlog_operator
ENV PATH=/opt/tributary/bin:$PATH \
    PYTHONPATH=/opt/tributary-operator \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SPARK_JDBC_JAR=/opt/tributary/jars/mariadb-java-client.jar
RUN useradd --uid 10001 --create-home --home-dir /var/lib/binlog binlog
USER 10001
WORKDIR /var/lib/binlog
# pump gRPC/HTTP, drainer gRPC/HTTP, capture HTTP, operator health
EXPOSE 8250 8251 8249 8252 8300 8080
# Spark on Kubernetes starts driver and executor pods from this image with the args `driver ...`
# or `executor`; the entrypoint runs those (scripts/image-entrypoint) and passes any other
# command through.
ENTRYPOINT ["/app/scripts/image-entrypoint"]
CMD ["binlog-pump", "--help"]
