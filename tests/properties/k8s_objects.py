"""Random Pod/Node JSON (as the apiserver or a stranger on the extender port sends it) and an
independent reference of kube-scheduler's feasibility, written from the Kubernetes sources'
semantics (k8s.io/component-helpers PodRequests, v1 ToleratesTaint, NodeSelectorRequirement
matching with strconv.ParseInt, resource.ParseQuantity's grammar) directly on the JSON.

The reference shares no code with drs_prom: the system under test goes JSON ->
kube.to_pod_request/to_node_info -> filters.check, the reference reads the JSON itself.
Alphabets are small on purpose, so that keys, values and taints collide often.
"""

from __future__ import annotations

import math
import re
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, InvalidOperation
from typing import Any

from hypothesis import strategies as st

KEYS = ("zone", "disk", "gpu", "metadata.name", "node.kubernetes.io/unschedulable")
VALUES = ("a", "b", "1", "10", "1_0", "+5", "-3", "99999999999999999999", "")
NODE_NAMES = ("n1", "n2", "a")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOL_OPERATORS = ("Equal", "Exists", "", "exists")  # "exists": a stranger's typo, not a valid operator
SEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "in")

# -- quantities -------------------------------------------------------------------

_GO_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?[0-9]+|)$"
)
_SUFFIX = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
INT64_MAX = 2**63 - 1
_WIDE = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)


def ref_quantity(q: Any) -> Decimal | None:
    """resource.ParseQuantity's grammar; None when Go would refuse the string."""
    if isinstance(q, bool):
        return None
    if isinstance(q, int):
        return Decimal(q)
    if isinstance(q, float):
        return Decimal(repr(q)) if math.isfinite(q) else None
    if not isinstance(q, str):
        return None
    m = _GO_QUANTITY.match(q)
    if not m:
        return None
    number, suffix = m.groups()
    if suffix not in _SUFFIX:  # e/E exponent
        exp = int(suffix[1:])
        if abs(exp) >= 2**31:  # Go parses the exponent as an int32
            return None
        return Decimal(number).scaleb(exp, _WIDE)  # exact: only the exponent moves
    return _WIDE.multiply(Decimal(number), _SUFFIX[suffix])


def _ref_amount(q: Any, scale: int) -> int:
    """A container's request in milli-units (scale 1000) or units; malformed or negative -> 0."""
    v = ref_quantity(q)
    if v is None or v <= 0:
        return 0
    v = v.scaleb(3 if scale == 1000 else 0, _WIDE)
    if v >= INT64_MAX:
        return INT64_MAX
    return int(v.to_integral_value(rounding="ROUND_CEILING"))


quantity_text = st.one_of(
    st.builds(
        lambda sign, num, suffix: f"{sign}{num}{suffix}",
        st.sampled_from(["", "", "+", "-"]),
        st.one_of(
            st.integers(0, 10**6).map(str),
            st.decimals(0, 10**4, places=3, allow_nan=False).map(str),
            st.just(".5"),
            st.just("1."),
        ),
        st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "E", "Ei", "e3", "e-3", "E+2", "e40"]),
    ),
    st.sampled_from(["Infinity", "nan", " 1", "1_0", "\u0661", "0x10", "1e999999999", "", "1 Gi", "--1"]),
    st.integers(-5, 10**6),
    st.text(max_size=8),
)

# -- objects ----------------------------------------------------------------------

keys = st.sampled_from(KEYS)
values = st.sampled_from(VALUES)


def _resources() -> st.SearchStrategy[dict]:
    amounts = st.dictionaries(st.sampled_from(["cpu", "memory"]), quantity_text, max_size=2)
    return st.fixed_dictionaries({}, optional={"requests": amounts, "limits": amounts})


container = st.fixed_dictionaries(
    {"name": st.just("c")},
    optional={"resources": _resources(), "restartPolicy": st.sampled_from(["Always", "Never"])},
)
toleration = st.fixed_dictionaries(
    {},
    optional={
        "key": st.sampled_from(KEYS + ("",)),
        "operator": st.sampled_from(TOL_OPERATORS),
        "value": values,
        "effect": st.sampled_from(EFFECTS + ("",)),
    },
)
requirement = st.fixed_dictionaries(
    {"key": keys, "operator": st.sampled_from(SEL_OPERATORS)},
    optional={"values": st.lists(values, max_size=2)},
)
field_requirement = st.fixed_dictionaries(
    {"key": st.just("metadata.name"), "operator": st.sampled_from(["In", "NotIn"])},
    optional={"values": st.lists(st.sampled_from(NODE_NAMES), max_size=2)},
)
term = st.fixed_dictionaries(
    {},
    optional={
        "matchExpressions": st.lists(requirement, max_size=2),
        "matchFields": st.lists(field_requirement, max_size=1),
    },
)
affinity = st.fixed_dictionaries(
    {
        "nodeAffinity": st.fixed_dictionaries(
            {
                "requiredDuringSchedulingIgnoredDuringExecution": st.fixed_dictionaries(
                    {"nodeSelectorTerms": st.lists(term, min_size=1, max_size=2)}
                )
            }
        )
    }
)

pods = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries({"name": st.just("p"), "namespace": st.just("ns")}),
        "spec": st.fixed_dictionaries(
            {"containers": st.lists(container, min_size=1, max_size=3)},
            optional={
                "initContainers": st.lists(container, max_size=3),
                "overhead": st.dictionaries(st.sampled_from(["cpu", "memory"]), quantity_text, max_size=2),
                "tolerations": st.lists(toleration, max_size=3),
                "nodeSelector": st.dictionaries(keys, values, max_size=2),
                "affinity": affinity,
            },
        ),
    }
)
taint = st.fixed_dictionaries({"key": keys, "value": values, "effect": st.sampled_from(EFFECTS)})
nodes = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries(
            {"name": st.sampled_from(NODE_NAMES), "labels": st.dictionaries(keys, values, max_size=3)}
        ),
        "spec": st.fixed_dictionaries(
            {}, optional={"taints": st.lists(taint, max_size=2), "unschedulable": st.booleans()}
        ),
        "status": st.fixed_dictionaries(
            {
                "allocatable": st.fixed_dictionaries(
                    {"cpu": quantity_text, "memory": quantity_text, "pods": st.sampled_from(["110", "0", "1"])}
                ),
                "conditions": st.lists(
                    st.fixed_dictionaries({"type": st.just("Ready"), "status": st.sampled_from(["True", "False"])}),
                    max_size=1,
                ),
            }
        ),
    }
)

# -- the reference ------------------------------------------------------------------


def ref_requests(pod: dict) -> tuple[int, int]:
    """component-helpers PodRequests: containers + sidecars, vs. each init container
    (plus the sidecars started before it), per resource; plus overhead."""

    def reqs(c: dict) -> tuple[int, int]:
        res = c.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        return _ref_amount(merged.get("cpu", 0), 1000), _ref_amount(merged.get("memory", 0), 1)

    spec = pod["spec"]
    total = [0, 0]
    for c in spec["containers"]:
        r = reqs(c)
        total = [total[i] + r[i] for i in range(2)]
    sidecars = [0, 0]
    init_max = [0, 0]
    for c in spec.get("initContainers") or []:
        r = reqs(c)
        if c.get("restartPolicy") == "Always":
            total = [total[i] + r[i] for i in range(2)]
            sidecars = [sidecars[i] + r[i] for i in range(2)]
            eff = sidecars
        else:
            eff = [r[i] + sidecars[i] for i in range(2)]
        init_max = [max(init_max[i], eff[i]) for i in range(2)]
    total = [max(total[i], init_max[i]) for i in range(2)]
    over = spec.get("overhead") or {}
    total[0] += _ref_amount(over.get("cpu", 0), 1000)
    total[1] += _ref_amount(over.get("memory", 0), 1)
    return min(total[0], INT64_MAX), min(total[1], INT64_MAX)  # sums saturate like each amount


def _ref_tolerates(tol: dict, taint: dict) -> bool:
    effect, key, op = tol.get("effect", ""), tol.get("key", ""), tol.get("operator", "")
    if effect and effect != taint["effect"]:
        return False
    if key and key != taint["key"]:
        return False
    if op in ("", "Equal"):
        # the apiserver refuses an empty key with Equal; such a toleration tolerates nothing here
        return bool(key) and tol.get("value", "") == taint.get("value", "")
    return op == "Exists"


def _go_parse_int(s: str) -> int | None:
    if not re.fullmatch(r"[+-]?[0-9]+", s):
        return None
    v = int(s)
    return v if -(2**63) <= v < 2**63 else None


def _ref_requirement(req: dict, labels: dict) -> bool:
    key, op, vals = req["key"], req["operator"], req.get("values") or []
    present = key in labels
    if op == "In":
        return present and labels[key] in vals
    if op == "NotIn":
        return not present or labels[key] not in vals
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(vals) != 1:
            return False
        have, want = _go_parse_int(labels[key]), _go_parse_int(vals[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _ref_field(req: dict, node_name: str) -> bool:
    vals = req.get("values") or []
    if req["operator"] == "In":
        return node_name in vals
    return node_name not in vals


def ref_feasible(pod: dict, node: dict) -> bool:
    spec, nspec, status = pod["spec"], node.get("spec") or {}, node["status"]
    labels = node["metadata"].get("labels") or {}
    name = node["metadata"]["name"]
    tols = spec.get("tolerations") or []
    if nspec.get("unschedulable") and not any(
        _ref_tolerates(t, {"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "NoSchedule"})
        for t in tols
    ):
        return False
    taints = list(nspec.get("taints") or [])
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
    if not ready:
        taints.append({"key": "node.kubernetes.io/not-ready", "value": "", "effect": "NoSchedule"})
    for t in taints:
        if t["effect"] in ("NoSchedule", "NoExecute") and not any(_ref_tolerates(tol, t) for tol in tols):
            return False
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    na = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    req = na.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:

        def term_ok(term: dict) -> bool:
            exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
            if not exprs and not fields:
                return False
            return all(_ref_requirement(r, labels) for r in exprs) and all(_ref_field(f, name) for f in fields)

        if not any(term_ok(t) for t in req.get("nodeSelectorTerms") or []):
            return False
    alloc = status["allocatable"]
    cpu, mem = ref_requests(pod)
    pods_allowed = ref_quantity(alloc.get("pods", "110"))
    if pods_allowed is None or pods_allowed < 1:
        return False
    if cpu > 0 and cpu > _ref_amount(alloc.get("cpu", 0), 1000):
        return False
    if mem > 0 and mem > _ref_amount(alloc.get("memory", 0), 1):
        return False
    return True


__all__ = ["InvalidOperation", "nodes", "pods", "quantity_text", "ref_feasible", "ref_quantity", "ref_requests"]
