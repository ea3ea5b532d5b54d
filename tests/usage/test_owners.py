"""A pod's top owner, its siblings' names and its image, from the pod's JSON: pure, literal data and generated names.

Pods are named here as the controllers and the apiserver name them (``generated``), independently of
drs_prom.usage.owners, and every owner's regex must match every pod its controller makes and no pod of an owner
whose name extends it (``web`` never claims ``web-api``'s pods).
"""

from __future__ import annotations

import logging
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drs_prom.usage import owners

SAFE = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand's alphabet


def generated(base: str, rng: random.Random) -> str:
    """``generateName: base`` as the apiserver does it (names.SimpleNameGenerator): base cut to 58, 5 random."""
    return base[:58] + "".join(rng.choice(SAFE) for _ in range(5))


def pods_of(kind: str, name: str, rng: random.Random) -> tuple[str, dict]:
    """A pod of owner ``kind/name`` as its controller makes it: (pod name, its metadata)."""
    if kind == "Deployment":
        template_hash = "".join(rng.choice(SAFE) for _ in range(rng.randint(1, 10)))
        rs = f"{name}-{template_hash}"
        pod = generated(rs + "-", rng)
        meta = {"labels": {"pod-template-hash": template_hash}, "ownerReferences": [_ref("ReplicaSet", rs)]}
    elif kind == "CronJob":
        job = f"{name}-{rng.randint(10**7, 10**8 - 1)}"  # minutes since the epoch: 8 digits until 2160
        pod = generated(job + "-", rng)
        meta = {"labels": {"job-name": job}, "ownerReferences": [_ref("Job", job)]}
    elif kind == "StatefulSet":
        pod = f"{name}-{rng.choice([0, 1, 7, 12, 250])}"
        meta = {"ownerReferences": [_ref("StatefulSet", name)]}
    elif kind == "Pod":
        pod, meta = name, {}
    else:  # ReplicaSet (no hash label), DaemonSet, Job
        pod = generated(name + "-", rng)
        meta = {"ownerReferences": [_ref(kind, name)]}
    return pod, {"metadata": {"name": pod, "namespace": "ns", **meta}}


def _ref(kind: str, name: str, controller: bool = True) -> dict:
    return {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": "u-" + name, "controller": controller}


def pod(name: str = "p", refs=None, labels=None, containers=None) -> dict:
    meta: dict = {"name": name, "namespace": "ns"}
    if refs is not None:
        meta["ownerReferences"] = refs
    if labels is not None:
        meta["labels"] = labels
    return {"metadata": meta, "spec": {"containers": containers if containers is not None else []}}


# -- top owner ---------------------------------------------------------------------------


def test_a_replicaset_with_the_template_hash_label_is_its_deployment():
    p = pod("web-7d9f8c6b5-x2k4p", [_ref("ReplicaSet", "web-7d9f8c6b5")], {"pod-template-hash": "7d9f8c6b5"})
    assert owners.top_owner(p) == "Deployment/web"
    multi = pod("a-b-7d9f8-x2k4p", [_ref("ReplicaSet", "a-b-7d9f8")], {"pod-template-hash": "7d9f8"})
    assert owners.top_owner(multi) == "Deployment/a-b"


def test_a_replicaset_without_the_label_or_whose_name_does_not_end_in_it_is_itself():
    assert owners.top_owner(pod("rs-x2k4p", [_ref("ReplicaSet", "rs")])) == "ReplicaSet/rs"
    other = pod("rs-x2k4p", [_ref("ReplicaSet", "web-abc")], {"pod-template-hash": "zzz"})
    assert owners.top_owner(other) == "ReplicaSet/web-abc"
    whole = pod("rs-x2k4p", [_ref("ReplicaSet", "-zzz")], {"pod-template-hash": "zzz"})  # nothing before the hash
    assert owners.top_owner(whole) == "ReplicaSet/-zzz"


def test_a_job_named_by_a_cronjob_is_the_cronjob_unless_the_caller_knows_better():
    assert owners.top_owner(pod("backup-28473120-x2k4p", [_ref("Job", "backup-28473120")])) == "CronJob/backup"
    assert owners.top_owner(pod("j-1234567-x2k4p", [_ref("Job", "j-1234567")])) == "Job/j-1234567"  # 7 digits
    assert owners.top_owner(pod("migrate-x2k4p", [_ref("Job", "migrate")])) == "Job/migrate"
    known = {"Job/backup-28473120": "Job/backup-28473120"}  # e.g. a Job a person named so, read from the API
    assert owners.top_owner(pod("p", [_ref("Job", "backup-28473120")]), known) == "Job/backup-28473120"
    assert owners.top_owner(pod("p", [_ref("ReplicaSet", "x")]), {"ReplicaSet/x": "Rollout/x"}) == "Rollout/x"


def test_other_controllers_and_bare_pods():
    assert owners.top_owner(pod("db-0", [_ref("StatefulSet", "db")])) == "StatefulSet/db"
    assert owners.top_owner(pod("agent-x2k4p", [_ref("DaemonSet", "agent")])) == "DaemonSet/agent"
    assert owners.top_owner(pod("solo")) == "Pod/solo"
    assert owners.top_owner(pod("solo", [])) == "Pod/solo"
    # the controller reference wins over the first one
    refs = [_ref("ConfigMap", "cfg", controller=False), _ref("DaemonSet", "agent")]
    assert owners.top_owner(pod("agent-x2k4p", refs)) == "DaemonSet/agent"
    assert owners.top_owner(pod("x", [_ref("ConfigMap", "cfg", controller=False)])) == "ConfigMap/cfg"


@pytest.mark.parametrize(
    "refs",
    [
        "ReplicaSet/web",  # not a list
        ["ReplicaSet/web"],  # not objects
        [{"kind": "ReplicaSet"}],  # no name
        [{"name": "web"}],  # no kind
        [{"kind": 7, "name": "web"}],
        [{"kind": "ReplicaSet", "name": ""}],
        [{"kind": "apps/ReplicaSet", "name": "web"}],
        [{"kind": "ReplicaSet", "name": "web"}, None],
    ],
)
def test_an_owner_chain_that_cannot_be_read_is_the_pod_itself_with_a_debug_line(refs, caplog):
    with caplog.at_level(logging.DEBUG, logger="drs_prom.usage.owners"):
        assert owners.top_owner(pod("odd-pod", refs)) == "Pod/odd-pod"
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]
    assert "odd-pod" in caplog.records[0].getMessage()


@pytest.mark.parametrize("body", [{}, {"metadata": None}, {"metadata": []}, {"metadata": {"name": 3}}])
def test_a_pod_without_readable_metadata_is_a_bare_pod(body):
    assert owners.top_owner(body) == "Pod/"
    assert owners.image_of(body) == ""


def test_image_of_the_first_container():
    c = [{"name": "app", "image": " shop:1.2 "}, {"name": "proxy", "image": "istio/proxyv2:1.20"}]
    assert owners.image_of(pod(containers=c)) == "shop:1.2"
    assert owners.image_of(pod(containers=[])) == ""
    assert owners.image_of(pod(containers=[{"name": "x"}])) == ""
    assert owners.image_of(pod(containers=["shop"])) == ""
    assert owners.image_of({"spec": {"containers": {"image": "x"}}}) == ""


# -- pod name regexes ----------------------------------------------------------------------

KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod")


def test_regexes_by_kind():
    assert owners.pod_name_regex("Deployment/web") == "^web-[bcdfghjklmnpqrstvwxz0-9]{1,10}-[a-z0-9]{5}$"
    assert owners.pod_name_regex("ReplicaSet/web") == "^web-[a-z0-9]{5}$"
    assert owners.pod_name_regex("Job/a.b") == r"^a\.b-[a-z0-9]{5}$"
    assert owners.pod_name_regex("StatefulSet/db") == "^db-(?:0|[1-9][0-9]*)$"
    assert owners.pod_name_regex("CronJob/backup") == "^backup-[0-9]{8,10}-[a-z0-9]{5}$"
    assert owners.pod_name_regex("Pod/solo.1") == r"^solo\.1$"
    for odd in ("Rollout/web", "web", "Deployment/", "/web", ""):
        assert owners.pod_name_regex(odd) is None


def test_web_never_claims_the_pods_of_web_api():
    rng = random.Random(0)
    for kind in KINDS:
        mine = re.compile(owners.pod_name_regex(f"{kind}/web") or "")
        for other in KINDS:
            if other == "Pod":
                continue  # a bare pod's name is anything its author chose
            for _ in range(20):
                assert not mine.search(pods_of(other, "web-api", rng)[0]), (kind, other)
        for _ in range(20):
            assert mine.search(pods_of(kind, "web", rng)[0]), kind
    # the apiserver's suffixes and older, decimal pod-template-hashes
    assert re.search(owners.pod_name_regex("Deployment/web") or "", "web-3837372172-x2k4p")
    assert not re.search(owners.pod_name_regex("StatefulSet/db") or "", "db-01")


DNS_LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?", fullmatch=True)
EXTENSION = st.from_regex(r"[aeiou][a-z0-9]{0,9}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(name=DNS_LABEL, extension=EXTENSION, mine=st.sampled_from(KINDS), seed=st.integers(0, 2**32))
def test_an_owners_regex_matches_its_pods_and_no_pod_of_a_longer_name(name, extension, mine, seed):
    rng = random.Random(seed)
    regex = re.compile(owners.pod_name_regex(f"{mine}/{name}") or "")
    pod_name, body = pods_of(mine, name, rng)
    assert regex.search(pod_name)
    assert owners.top_owner(body) == f"{mine}/{name}"
    for other in KINDS[:-1]:  # not "Pod": a bare pod's name is free
        assert not regex.search(pods_of(other, f"{name}-{extension}", rng)[0]), other


@settings(max_examples=200, deadline=None)
@given(
    name=st.from_regex(r"[a-z]([a-z0-9-]{40,60}[a-z0-9])", fullmatch=True),
    kind=st.sampled_from(("Deployment", "ReplicaSet", "DaemonSet", "Job", "CronJob")),
    seed=st.integers(0, 2**32),
)
def test_long_names_are_cut_as_generate_name_cuts_them(name, kind, seed):
    """A generated name's base is cut to 58 characters: the hash, the minutes, even the owner's name are cut."""
    name = name[:52] if kind == "CronJob" else name  # CronJob names are at most 52 characters
    rng = random.Random(seed)
    regex = re.compile(owners.pod_name_regex(f"{kind}/{name}") or "")
    for _ in range(10):
        pod_name, _body = pods_of(kind, name, rng)
        assert len(pod_name) <= 63 and regex.search(pod_name), pod_name


def test_regexes_escape_what_a_regex_would_read():
    regex = owners.pod_name_regex("Pod/a.b") or ""
    assert re.search(regex, "a.b") and not re.search(regex, "axb")
    assert owners.escape("a.b-c_d/é") == "a\\.b-c_d/é"


# -- images --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "spellings"),
    [
        ("nginx", ("nginx", "docker.io/library/nginx:latest")),
        ("nginx:1.25", ("nginx:1.25", "docker.io/library/nginx:1.25")),
        ("bitnami/redis:7", ("bitnami/redis:7", "docker.io/bitnami/redis:7")),
        ("docker.io/library/nginx:1.25", ("docker.io/library/nginx:1.25",)),
        ("registry.example/shop:1", ("registry.example/shop:1",)),
        ("localhost:5000/shop", ("localhost:5000/shop", "localhost:5000/shop:latest")),
        ("ghcr.io/o/app@sha256:abc", ("ghcr.io/o/app@sha256:abc",)),
        ("app@sha256:abc", ("app@sha256:abc", "docker.io/library/app@sha256:abc")),
        ("", ()),
    ],
)
def test_image_spellings(image, spellings):
    assert owners.image_spellings(image) == spellings


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
REF = st.fixed_dictionaries(
    {},
    optional={"kind": JSON | st.sampled_from(["ReplicaSet", "Job", "StatefulSet"]), "name": JSON, "controller": JSON},
)


@settings(max_examples=300, deadline=None)
@given(
    refs=JSON | st.lists(REF | JSON, max_size=3),
    labels=JSON | st.dictionaries(st.just("pod-template-hash"), JSON),
    containers=JSON,
)
def test_any_body_has_an_owner_and_an_image_and_never_raises(refs, labels, containers):
    body = {"metadata": {"name": "p", "ownerReferences": refs, "labels": labels}, "spec": {"containers": containers}}
    kind, sep, name = owners.top_owner(body).partition("/")
    assert sep and kind and (name or kind == "Pod")
    assert isinstance(owners.image_of(body), str)
    regex = owners.pod_name_regex(owners.top_owner(body))
    assert regex is None or re.compile(regex)
