"""The Spark-on-Kubernetes rendering: argv and pod template agree with each other and with
the RBAC the driver is given."""

from __future__ import annotations

from services.spark.k8s import (
    CONTAINER,
    DRIVER_RBAC,
    STAGING_MOUNT,
    K8sSubmission,
    pod_template,
    submit_args,
)

SUB = K8sSubmission(
    "https://10.0.0.1:6443",
    "data",
    "registry.local/tributary:1.0",
    staging_claim="staging-pvc",
    sink_secret="downstream",
)


def conf_of(argv: list[str]) -> dict[str, str]:
    pairs = [argv[i + 1] for i, a in enumerate(argv) if a == "--conf"]
    return dict(p.split("=", 1) for p in pairs)


def test_submit_args_run_the_job_in_cluster_mode_with_the_template() -> None:
    argv = submit_args(SUB, "catchup", ["--staging", f"{STAGING_MOUNT}/r1"], "/t.yaml", name="cu")
    assert argv[:8] == [
        "spark-submit",
        "--master",
        "k8s://https://10.0.0.1:6443",
        "--deploy-mode",
        "cluster",
        "--name",
        "cu",
        "--conf",
    ]
    assert argv[-3:] == ["local:///opt/tributary/spark-jobs/catchup.py", "--staging", "/staging/r1"]
    conf = conf_of(argv)
    assert conf["spark.kubernetes.namespace"] == "data"
    assert conf["spark.kubernetes.container.image"] == "registry.local/tributary:1.0"
    assert conf["spark.kubernetes.authenticate.driver.serviceAccountName"] == "tributary-spark"
    assert conf["spark.kubernetes.driver.podTemplateFile"] == "/t.yaml"
    assert conf["spark.kubernetes.driver.podTemplateContainerName"] == CONTAINER
    assert conf["spark.kubernetes.driver.secretKeyRef.CATCHUP_SINK_URL"] == "downstream:sink-url"
    assert conf["spark.jars"].startswith("local:///")


def test_master_is_not_prefixed_twice() -> None:
    sub = K8sSubmission("k8s://https://api:443", "ns", "img")
    assert sub.master == "k8s://https://api:443"


def test_pod_template_mounts_staging_under_the_service_account() -> None:
    pod = pod_template(SUB)
    spec = pod["spec"]
    assert spec["serviceAccountName"] == "tributary-spark"
    (container,) = spec["containers"]
    assert container["name"] == CONTAINER
    assert container["volumeMounts"] == [{"name": "staging", "mountPath": STAGING_MOUNT}]
    assert spec["volumes"][0]["persistentVolumeClaim"] == {"claimName": "staging-pvc"}
    assert "volumes" not in pod_template(K8sSubmission("https://a", "n", "i"))["spec"]


def test_rbac_lets_the_driver_manage_executors() -> None:
    verbs = {r: set(rule["verbs"]) for rule in DRIVER_RBAC for r in rule["resources"]}
    assert {"create", "delete", "watch", "list"} <= verbs["pods"]
    assert {"create", "delete"} <= verbs["services"] & verbs["configmaps"]
    assert verbs["persistentvolumeclaims"] == {"get", "list"}


def test_rbac_covers_the_submission_client_and_nothing_secret() -> None:
    """spark-submit server-side applies the driver's service, config maps and NetworkPolicy (an
    apply that creates needs create and patch); the driver labels executor pods (patch)."""
    verbs = {
        (group, r): set(rule["verbs"])
        for rule in DRIVER_RBAC
        for group in rule["apiGroups"]
        for r in rule["resources"]
    }
    for resource in ("pods", "services", "configmaps"):
        assert {"create", "patch"} <= verbs["", resource]
    assert verbs["networking.k8s.io", "networkpolicies"] == {"create", "patch", "delete"}
    assert {r for _, r in verbs} == {
        "pods",
        "services",
        "configmaps",
        "persistentvolumeclaims",
        "networkpolicies",
    }


def test_submission_credentials_and_waiting_are_rendered_only_when_given() -> None:
    plain = conf_of(submit_args(SUB, "catchup", [], "/t.yaml", name="cu"))
    assert plain["spark.kubernetes.submission.waitAppCompletion"] == "true"
    assert not any(k.startswith("spark.kubernetes.authenticate.submission.") for k in plain)
    assert not any(k.endswith("Env.PYTHONPATH") for k in plain)  # the image has it installed
    sub = K8sSubmission(
        "https://a:6443",
        "ns",
        "img",
        submit_ca_file="/ca.crt",
        submit_token_file="/token",
        wait=False,
    )
    conf = conf_of(submit_args(sub, "catchup", [], "/t.yaml", name="cu"))
    assert conf["spark.kubernetes.authenticate.submission.caCertFile"] == "/ca.crt"
    assert conf["spark.kubernetes.authenticate.submission.oauthTokenFile"] == "/token"
    assert conf["spark.kubernetes.submission.waitAppCompletion"] == "false"
    (container,) = pod_template(sub)["spec"]["containers"]
    assert "env" not in container  # no PYTHONPATH: the project is installed in the image
