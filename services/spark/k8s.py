"""Spark-on-Kubernetes submission, rendered as data: the ``spark-submit`` argv (cluster mode),
the Spark configuration of a driver running in a pod of its own (client mode: the drainer's
catch-up, ``client_conf``), and the pod template. Pure functions; whoever submits writes the
template to a file and runs the argv or hands the configuration to the session.

The driver runs in the cluster (``--deploy-mode cluster``) under the chart's Spark service
account (helm/binlog-operator/templates/spark-rbac.yaml, a namespaced Role with exactly
``DRIVER_RBAC``; tests/k8s/test_k8s_spark.py checks both are equal and submits for real as that
account). The rules cover the two clients that act as it:

* ``spark-submit`` (cluster mode) creates the driver pod, then server-side applies the driver's
  headless service, its config maps and a NetworkPolicy for the executors (an apply that
  creates needs ``create`` and ``patch``), and deletes them again if that fails;
* the driver creates, watches, lists, labels (``patch``) and deletes its executor pods and their
  config maps, and lists the staging claim (mounted, never created).

No secrets (the sink URL reaches the driver as a ``secretKeyRef`` the kubelet resolves) and
nothing outside the namespace. The product image has the project installed (the jobs are the
installed ``services.spark`` modules; the Dockerfile links their directory at ``JOBS_DIR``, so the
path does not depend on the image's Python version) and the MariaDB JDBC jar at ``IMAGE_JAR``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tributary.image import IMAGE_UID

IMAGE_JAR = "/opt/tributary/jars/mariadb-java-client.jar"
JOBS_DIR = "/opt/tributary/spark-jobs"  # the image's services/spark package directory
STAGING_MOUNT = "/staging"
CONTAINER = "spark"

DRIVER_RBAC: list[dict[str, Any]] = [
    {
        "apiGroups": [""],
        "resources": ["pods"],
        "verbs": ["create", "get", "list", "watch", "patch", "delete", "deletecollection"],
    },
    {
        "apiGroups": [""],
        "resources": ["services", "configmaps"],
        "verbs": ["create", "get", "list", "patch", "delete", "deletecollection"],
    },
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "list"]},
    {
        "apiGroups": ["networking.k8s.io"],
        "resources": ["networkpolicies"],
        "verbs": ["create", "patch", "delete"],
    },
]


@dataclass(frozen=True)
class K8sSubmission:
    api_server: str  # e.g. https://kubernetes.default.svc:443
    namespace: str
    image: str
    service_account: str = "tributary-spark"
    staging_claim: str = ""  # PVC holding the staged ranges, mounted at staging_mount
    staging_mount: str = STAGING_MOUNT  # where pods see the claim (the driver's path, client mode)
    sink_secret: str = ""  # Secret with the sink URL under key "sink-url" (driver env)
    executors: int = 2
    executor_cores: int = 1
    executor_memory: str = "1g"
    driver_memory: str = "1g"
    labels: dict[str, str] = field(default_factory=dict)
    # Who talks to the API server (spark-submit in cluster mode, the driver in client mode): a
    # CA and a bearer-token file; empty = the client's own discovery (the in-cluster service
    # account, else the kubeconfig).
    submit_ca_file: str = ""
    submit_token_file: str = ""
    wait: bool = True  # False: spark-submit returns once the driver pod is created

    @property
    def master(self) -> str:
        server = self.api_server
        return server if server.startswith("k8s://") else f"k8s://{server}"


def pod_template(sub: K8sSubmission) -> dict[str, Any]:
    """The pod template (driver and executors alike): service account, non-root user, the
    staging volume, the product's labels. No ``PYTHONPATH``: the image's Python has the project
    installed, and its ``python3`` is the one first on ``PATH`` (what the executors start)."""
    container: dict[str, Any] = {
        "name": CONTAINER,
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True},
    }
    spec: dict[str, Any] = {
        "serviceAccountName": sub.service_account,
        "securityContext": {"runAsNonRoot": True, "runAsUser": IMAGE_UID, "fsGroup": IMAGE_UID},
        "containers": [container],
    }
    if sub.staging_claim:
        container["volumeMounts"] = [{"name": "staging", "mountPath": sub.staging_mount}]
        spec["volumes"] = [
            {"name": "staging", "persistentVolumeClaim": {"claimName": sub.staging_claim}}
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "labels": {"app.kubernetes.io/name": "tributary-spark", **sub.labels},
        },
        "spec": spec,
    }


def submit_args(
    sub: K8sSubmission,
    job: str,
    job_args: Sequence[str],
    template_path: str,
    *,
    name: str,
) -> list[str]:
    """``spark-submit`` argv running ``services/spark/<job>.py`` in the cluster."""
    conf = {
        "spark.kubernetes.namespace": sub.namespace,
        "spark.kubernetes.container.image": sub.image,
        "spark.kubernetes.authenticate.driver.serviceAccountName": sub.service_account,
        "spark.kubernetes.driver.podTemplateFile": template_path,
        "spark.kubernetes.executor.podTemplateFile": template_path,
        "spark.kubernetes.driver.podTemplateContainerName": CONTAINER,
        "spark.kubernetes.executor.podTemplateContainerName": CONTAINER,
        "spark.executor.instances": str(sub.executors),
        "spark.executor.cores": str(sub.executor_cores),
        "spark.executor.memory": sub.executor_memory,
        "spark.driver.memory": sub.driver_memory,
        "spark.jars": f"local://{IMAGE_JAR}",
        "spark.driver.extraClassPath": IMAGE_JAR,
        "spark.executor.extraClassPath": IMAGE_JAR,
        "spark.kubernetes.submission.waitAppCompletion": "true" if sub.wait else "false",
        "spark.ui.enabled": "false",
    }
    if sub.submit_ca_file:
        conf["spark.kubernetes.authenticate.submission.caCertFile"] = sub.submit_ca_file
    if sub.submit_token_file:
        conf["spark.kubernetes.authenticate.submission.oauthTokenFile"] = sub.submit_token_file
    if sub.sink_secret:
        conf["spark.kubernetes.driver.secretKeyRef.CATCHUP_SINK_URL"] = (
            f"{sub.sink_secret}:sink-url"
        )
    argv = ["spark-submit", "--master", sub.master, "--deploy-mode", "cluster", "--name", name]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    return [*argv, f"local://{JOBS_DIR}/{job}.py", *job_args]


def client_conf(
    sub: K8sSubmission, *, driver_host: str, driver_pod: str, template_path: str
) -> dict[str, str]:
    """The Spark configuration of a client-mode driver running in pod ``driver_pod`` at IP
    ``driver_host`` (the drainer's pod: its catch-up job's SparkSession is the driver).

    * Executors are created through the API server with the image and the pod template at
      ``template_path`` (a file the driver reads: the service account, the staging claim at
      ``staging_mount``).
    * ``spark.kubernetes.driver.pod.name`` gives every executor an owner reference to the
      driver's pod, so the cluster deletes them if that pod goes; the pod must exist (Spark
      reads it at start).
    * The driver binds to ``driver_host`` itself: Spark 4 tells the executors the bind address,
      not ``spark.driver.host``, in k8s mode (measured: a ``0.0.0.0`` bind gave them
      ``spark://CoarseGrainedScheduler@0.0.0.0:port``).
    * The driver neither owns nor reuses on-demand claims: an owning driver deletes the claims
      labelled with its app when it stops (Spark 4's default; DRIVER_RBAC has no PVC delete,
      and the staging claim is never Spark's).
    * Credentials: client mode reads ``spark.kubernetes.authenticate.caCertFile`` and
      ``...oauthTokenFile`` (cluster mode's ``...submission.*`` keys are spark-submit's).
    * ``minRegisteredResourcesRatio`` 0: the context is up (and its shutdown hook, which deletes
      the executors, registered) at once instead of after waiting up to 30 s for executors;
      tasks wait for them instead.
    """
    conf = {
        "spark.master": sub.master,
        "spark.submit.deployMode": "client",
        "spark.kubernetes.namespace": sub.namespace,
        "spark.kubernetes.container.image": sub.image,
        "spark.kubernetes.executor.podTemplateFile": template_path,
        "spark.kubernetes.executor.podTemplateContainerName": CONTAINER,
        "spark.kubernetes.driver.pod.name": driver_pod,
        "spark.driver.host": driver_host,
        "spark.driver.bindAddress": driver_host,
        "spark.executor.instances": str(sub.executors),
        "spark.executor.cores": str(sub.executor_cores),
        "spark.executor.memory": sub.executor_memory,
        "spark.jars": f"local://{IMAGE_JAR}",
        "spark.driver.extraClassPath": IMAGE_JAR,
        "spark.executor.extraClassPath": IMAGE_JAR,
        "spark.scheduler.minRegisteredResourcesRatio": "0",
        "spark.kubernetes.driver.ownPersistentVolumeClaim": "false",
        "spark.kubernetes.driver.reusePersistentVolumeClaim": "false",
        "spark.ui.enabled": "false",
    }
    if sub.submit_ca_file:
        conf["spark.kubernetes.authenticate.caCertFile"] = sub.submit_ca_file
    if sub.submit_token_file:
        conf["spark.kubernetes.authenticate.oauthTokenFile"] = sub.submit_token_file
    return conf
