"""Any PromQL store: VictoriaMetrics single-node answers the state and history queries like Prometheus.

One simulated episode is written once as node_exporter samples (drs_prom/sim/backfill.py);
Prometheus gets them as TSDB blocks (promtool), VictoriaMetrics the very same samples
through its Prometheus-format import. Then the scheduler's snapshot (the six-feature
matrix and the stale set) and the retraining path (query_range history -> rebuilt
transitions) are read from both stores and compared. The maximum absolute difference per
feature is printed: that is the number a user moving to VictoriaMetrics cares about.

Auth runs against a second VictoriaMetrics with its own -httpAuth.* (basic auth),
-http.pathPrefix and -tls flags and a certificate from a throw-away CA: a real server
rejecting wrong credentials and an unknown CA, not a fake.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import requests

from drs_prom.config import Settings
from drs_prom.errors import ConfigError, MetricsError
from drs_prom.features import FEATURES
from drs_prom.registry import make_policy
from drs_prom.retrain.history import fetch_history
from drs_prom.retrain.rebuild import load_decisions, rebuild_transitions, reward_delay
from drs_prom.signals.prometheus import PrometheusSource, http_session
from drs_prom.sim.backfill import create_blocks, write_openmetrics
from drs_prom.sim.trace import journal_rows, run_sim
from drs_prom.stores.journal import Journal
from tests.prom.fixtures import start_prometheus
from tests.prom.victoria import PROMETHEUS_LOOKBACK, openmetrics_to_prometheus, start_victoria_metrics
from tests.retrain.test_retrain_tsdb import STEP, WINDOW, scenario, settings_for
from tests.specs import SPEC

pytestmark = pytest.mark.integration

# Both stores keep float64 samples; VictoriaMetrics stores them as decimal mantissa +
# exponent, which rounds in the 12th-13th significant digit. Features are rates of
# counters ~1e5..1e10, so differences far below 1e-6 of a feature's scale are rounding.
REL_TOL = 1e-6
GAP_SIM = (1500.0, 1800.0)  # sim seconds during which node 2 was not scraped


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory):
    import time

    tmp = tmp_path_factory.mktemp("any-store")
    sc = scenario().with_changes(arrivals=[{"pods": 90, "rate_per_second": 0.02, "process": "poisson"}])
    run = run_sim(sc, make_policy("least-loaded", SPEC, 0), seed=3, epsilon=0.3)
    end = run.duration + 900.0
    run.epoch = float(np.floor((time.time() - end - 1200.0) / STEP) * STEP)
    times = np.arange(0.0, end + STEP / 2, STEP)
    counters, mem = run.counters(times)
    present = np.ones((len(times), len(run.names)), bool)
    present[(times >= GAP_SIM[0]) & (times < GAP_SIM[1]), 2] = False
    om = tmp / "history.om"
    samples = write_openmetrics(om, run.nodes(), run.epoch + times, counters, mem, present)
    create_blocks(om, tmp / "tsdb")
    prom = start_prometheus(tmp / "prom", storage_path=tmp / "tsdb", extra_args=["--storage.tsdb.retention.time=100y"])
    vm = start_victoria_metrics(tmp / "vm", extra_args=[PROMETHEUS_LOOKBACK])
    try:
        vm.import_prometheus(openmetrics_to_prometheus(om))
        print(
            f"\n{samples} samples ({end / 3600:.2f} h, {len(run.decisions)} decisions) in Prometheus and VictoriaMetrics"
        )
        yield {"tmp": tmp, "sc": sc, "run": run, "prom": prom, "vm": vm, "times": times}
    finally:
        vm.stop()
        prom.stop()


def _per_feature_diff(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, float]:
    return {f: float(np.nanmax(np.abs(a[f].to_numpy() - b[f].to_numpy()), initial=0.0)) for f in FEATURES}


def _near_gap(t_rel: float) -> bool:
    """Within one rate window (plus a step) of the series' start or the scrape gap's edges: the window is
    partial there, and the stores differ by design (Prometheus extrapolates the samples inside the window,
    VictoriaMetrics takes the increase from the last sample before it, or reads none)."""
    lo, hi = GAP_SIM
    return t_rel <= WINDOW + STEP or lo - STEP <= t_rel <= hi + WINDOW + STEP


def test_state_matrix_matches_prometheus(stores) -> None:
    run, tmp = stores["run"], stores["tmp"]
    settings = {k: settings_for(tmp, stores[k].url, stores["sc"]) for k in ("prom", "vm")}
    instants = run.epoch + stores["times"][6 :: max(1, len(stores["times"]) // 60)]
    instants = np.union1d(instants, run.epoch + np.arange(GAP_SIM[0] - 60, GAP_SIM[1] + 120, STEP))
    worst = {"clean": dict.fromkeys(FEATURES, 0.0), "edge": dict.fromkeys(FEATURES, 0.0)}
    scale = dict.fromkeys(FEATURES, 0.0)
    stale_seen = 0
    for at in instants:
        snaps = {}
        for k, s in settings.items():
            src = PrometheusSource(s.prometheus, clock=lambda at=at: float(at))
            try:
                snaps[k] = src.snapshot()
            finally:
                src.close()
        p, v = snaps["prom"], snaps["vm"]
        t_rel = at - run.epoch
        assert list(p.features.index) == list(v.features.index), t_rel
        assert p.stale == v.stale, f"stale nodes differ at t={t_rel:.0f}s: {p.stale} vs {v.stale}"
        stale_seen += len(p.stale)
        kind = "edge" if _near_gap(t_rel) else "clean"
        if kind == "clean":
            assert p.features.isna().equals(v.features.isna()), t_rel
        for f, d in _per_feature_diff(p.features, v.features).items():
            worst[kind][f] = max(worst[kind][f], d)
            scale[f] = max(scale[f], float(np.nanmax(np.abs(p.features[f].to_numpy()), initial=0.0)))
    for kind in ("clean", "edge"):
        print(
            f"snapshot, {kind} instants: max |Prometheus - VictoriaMetrics| per feature: "
            + ", ".join(f"{f} {worst[kind][f]:.3g} (of {scale[f]:.3g})" for f in FEATURES)
        )
    print(f"{len(instants)} instants, {stale_seen} stale node readings (the gap), identical in both stores")
    assert stale_seen > 0, "the gap must make a node stale, or staleness was not compared"
    assert sum(scale[f] > 0 for f in FEATURES) >= 4, "most features must carry load, or the comparison proves little"
    assert all(worst["clean"][f] <= REL_TOL * max(scale[f], 1.0) for f in FEATURES), worst


def test_history_and_rebuilt_transitions_match_prometheus(stores) -> None:
    run, tmp = stores["run"], stores["tmp"]
    j = Journal(":memory:")
    for r in journal_rows(run, "least-loaded"):
        j.append(r)
    decisions, _ = load_decisions(j, 0, float("inf"), 10**6)
    rebuilt = {}
    history = {}
    for k in ("prom", "vm"):
        s: Settings = settings_for(tmp, stores[k].url, stores["sc"])
        src = PrometheusSource(s.prometheus)
        try:
            history[k] = fetch_history(src, decisions[0].ts - 100, decisions[-1].ts + reward_delay(s) + 100, STEP)
        finally:
            src.close()
        rebuilt[k] = rebuild_transitions(decisions, history[k], s)
    hp, hv = history["prom"], history["vm"]
    np.testing.assert_array_equal(hp.times, hv.times)
    assert set(hp.values) == set(hv.values) == set(run.names)
    assert hp.cores == hv.cores and hp.mem_bytes == hv.mem_bytes
    clean = np.array([not _near_gap(t - run.epoch) for t in hp.times])
    per_feature = np.zeros(len(FEATURES))
    edge_cells = 0
    for node in hp.values:
        a, b = hp.values[node], hv.values[node]
        assert np.array_equal(np.isnan(a[clean]), np.isnan(b[clean])), f"gaps differ for {node} away from the gap"
        per_feature = np.maximum(per_feature, np.nanmax(np.abs(a[clean] - b[clean]), axis=0, initial=0.0))
        edge_cells += int((np.isnan(a[~clean]) != np.isnan(b[~clean])).any(axis=1).sum())
    scale = np.nanmax(np.abs(np.concatenate(list(hp.values.values()))), axis=0)
    print(f"history diffs {per_feature} of scale {scale}")
    assert np.all(per_feature <= REL_TOL * np.maximum(scale, 1.0)), (per_feature, scale)
    (tp, skip_p, _), (tv, skip_v, _) = rebuilt["prom"], rebuilt["vm"]
    by_ts = {t.ts: t for t in tv}

    # A decision whose state or reward window touches the gap's edge may be kept by one store and skipped by the other.
    def touches(t):
        return _near_gap(t.ts - run.epoch) or _near_gap(
            t.ts - run.epoch + reward_delay(settings_for(tmp, "http://x", stores["sc"]))
        )

    pairs = [(t, by_ts[t.ts]) for t in tp if not touches(t)]
    assert len(pairs) > 50 and len(pairs) == sum(1 for t in tv if not touches(t))
    state = max(float(np.abs(a.ctx.load - b.ctx.load).max()) for a, b in pairs)
    after = max(float(np.abs(a.load_after - b.load_after).max()) for a, b in pairs)
    reward = max(abs(a.reward - b.reward) for a, b in pairs)
    assert all(a.action == b.action for a, b in pairs)
    print(
        f"query_range history ({len(hp.times)} steps x {len(hp.values)} nodes, {int((~clean).sum())} steps at the gap's edges) "
        "max |diff| per raw feature away from the gap: "
        + ", ".join(f"{f} {d:.3g}" for f, d in zip(FEATURES, per_feature))
        + f"; {edge_cells} node-steps at the edges present in one store only"
        + f"; {len(pairs)} rebuilt transitions compared: max |state diff| {state:.2e}, |after diff| {after:.2e}, "
        f"|reward diff| {reward:.2e}; transitions Prometheus {len(tp)} / VictoriaMetrics {len(tv)}; "
        f"skipped {dict(skip_p)} / {dict(skip_v)}"
    )
    assert state < 1e-6 and after < 1e-6 and reward < 1e-6


# -- auth, path prefix and a private CA, against a real VictoriaMetrics -----------------------


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def secured_vm(tmp_path_factory: pytest.TempPathFactory, stores):
    """VictoriaMetrics behind basic auth, under /vm, over TLS with a certificate of a throw-away CA."""
    tmp = tmp_path_factory.mktemp("vm-auth")
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
             "-subj", "/CN=drs-test-ca", "-keyout", "ca.key", "-out", "ca.crt", cwd=tmp)  # fmt: skip
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=127.0.0.1",
             "-keyout", "vm.key", "-out", "vm.csr", cwd=tmp)  # fmt: skip
    (tmp / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "vm.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
             "-extfile", "san.ext", "-out", "vm.crt", cwd=tmp)  # fmt: skip
    user, password = "drs", "s3cret-pw"
    ctx = ssl.create_default_context(cafile=str(tmp / "ca.crt"))
    auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    vm = start_victoria_metrics(
        tmp,
        extra_args=[
            PROMETHEUS_LOOKBACK,
            f"-httpAuth.username={user}",
            f"-httpAuth.password={password}",
            "-tls",
            f"-tlsCertFile={tmp / 'vm.crt'}",
            f"-tlsKeyFile={tmp / 'vm.key'}",
        ],
        path_prefix="/vm",
        scheme="https",
        headers={"Authorization": auth},
        ssl_context=ctx,
    )
    try:
        vm.import_prometheus(openmetrics_to_prometheus(stores["tmp"] / "history.om"))
        (tmp / "password").write_text(password + "\n")
        at = stores["run"].epoch + 600.0  # inside the imported history
        yield {
            "at": at,
            "vm": vm,
            "tmp": tmp,
            "user": user,
            "password": password,
            "port": vm.url.split(":")[2].split("/")[0],
        }
    finally:
        vm.stop()


def _capacity(prom: dict, **overrides: object) -> pd.DataFrame:
    s = Settings.model_validate({"prometheus": {"url": f"https://127.0.0.1:{prom['port']}", **overrides}})
    src = PrometheusSource(s.prometheus, clock=lambda: prom["at"])
    try:
        return src.node_capacity()
    finally:
        src.close()


def test_basic_auth_path_prefix_and_private_ca(secured_vm, stores) -> None:
    good = {
        "path_prefix": "/vm",
        "basic_auth_username": secured_vm["user"],
        "basic_auth_password_file": str(secured_vm["tmp"] / "password"),
        "ca_file": str(secured_vm["tmp"] / "ca.crt"),
    }
    cap = _capacity(secured_vm, **good)
    assert len(cap) == 4 and (cap["cpu_cores"] > 0).all()
    src = PrometheusSource(
        Settings().prometheus.model_copy(update={"url": stores["prom"].url}), clock=lambda: secured_vm["at"]
    )
    try:
        assert cap.equals(src.node_capacity()), "same series, same capacity through auth + TLS + prefix"
    finally:
        src.close()
    with pytest.raises(MetricsError, match=r"answered HTTP 401"):
        _capacity(secured_vm, **{**good, "basic_auth_password_file": "", "basic_auth_password": "wrong"})
    with pytest.raises(MetricsError, match=r"TLS failed .*set prometheus.ca_file"):
        _capacity(secured_vm, **{k: v for k, v in good.items() if k != "ca_file"})
    with pytest.raises(MetricsError, match=r"answered HTTP 40[04]"):
        _capacity(secured_vm, **{**good, "path_prefix": ""})


def test_env_overrides_reach_the_client(secured_vm, monkeypatch: pytest.MonkeyPatch) -> None:
    from drs_prom.config import load_settings

    monkeypatch.setenv("DRS_PROM_PROMETHEUS_URL", f"https://127.0.0.1:{secured_vm['port']}")
    monkeypatch.setenv("DRS_PROM_PROMETHEUS_PATH_PREFIX", "/vm/")
    monkeypatch.setenv("DRS_PROM_PROMETHEUS_BASIC_AUTH_USERNAME", secured_vm["user"])
    monkeypatch.setenv("DRS_PROM_PROMETHEUS_BASIC_AUTH_PASSWORD", secured_vm["password"])
    monkeypatch.setenv("DRS_PROM_PROMETHEUS_CA_FILE", str(secured_vm["tmp"] / "ca.crt"))
    monkeypatch.setenv("DRS_PROM_PROMETHEUS_HEADERS", "X-Scope-OrgID=team-a")
    s = load_settings()
    assert s.prometheus.api_url == f"https://127.0.0.1:{secured_vm['port']}/vm"
    assert "s3cret" not in repr(s) and "s3cret" not in s.model_dump_json()
    src = PrometheusSource(s.prometheus, clock=lambda: secured_vm["at"])
    try:
        assert len(src.node_capacity()) == 4
    finally:
        src.close()


def test_bearer_token_is_sent_and_file_reread(tmp_path: Path) -> None:
    """VictoriaMetrics single-node has no bearer-token check (vmauth, Mimir's gateway and
    Thanos' proxies do), so this looks at the request the client would send: the header,
    and that a rotated token file is read again for the next request."""
    token = tmp_path / "token"
    token.write_text("first\n")
    s = Settings.model_validate({"prometheus": {"bearer_token_file": str(token), "headers": {"X-Scope-OrgID": "t1"}}})
    session = http_session(s.prometheus)

    def prep():
        return session.prepare_request(requests.Request("GET", "http://127.0.0.1:1/api/v1/query"))

    assert prep().headers["Authorization"] == "Bearer first"
    assert prep().headers["X-Scope-OrgID"] == "t1"
    token.write_text("second")
    assert prep().headers["Authorization"] == "Bearer second"
    inline = http_session(Settings.model_validate({"prometheus": {"bearer_token": "abc"}}).prometheus)
    assert inline.prepare_request(requests.Request("GET", "http://x/")).headers["Authorization"] == "Bearer abc"


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"bearer_token": "a", "basic_auth_username": "u"}, "not both"),
        ({"basic_auth_password": "p"}, "needs basic_auth_username"),
        ({"ca_file": "/nonexistent/ca.crt"}, "does not exist"),
        ({"url": "http://h:9090", "ca_file": __file__}, "need an https:// url"),
        ({"path_prefix": "prometheus"}, "starting with '/'"),
        ({"path_prefix": "/prometheus/api/v1"}, "stop before /api/v1"),
        ({"headers": "X-Scope-OrgID"}, "Name=value"),
    ],
)
def test_bad_store_settings_fail_at_load(tmp_path: Path, section: dict, message: str) -> None:
    from drs_prom.config import load_settings

    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"prometheus": section}))
    with pytest.raises(ConfigError, match=message) as err:
        load_settings(cfg)
    assert "\n" not in str(err.value)
