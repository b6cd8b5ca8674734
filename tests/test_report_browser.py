"""report.html in a real browser: headless Chromium renders it, a screenshot is taken, and the table it shows
carries the numbers of metrics.json. Needs Debian's `chromium` (skipped, with the reason, when absent)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from pcr_ray.evaluate import compose_config, evaluate
from tests.pipeline_util import CHROMIUM_FLAGS, MetricsTableParser, read_metrics, read_rows, smoke_overrides

pytestmark = [pytest.mark.browser, pytest.mark.ray, pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _browser(args: list[str], profile, timeout: int = 90) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (Debian: apt-get install chromium)")
def test_chromium_renders_the_report_and_its_table_matches_metrics_json(ray_session, tmp_path):
    run = tmp_path / "run"
    methods = "methods=[verifier_only,{label:verifier_only_b1,method:verifier_only,overrides:{beam_width:1}}]"
    evaluate(compose_config(smoke_overrides(run, None, methods)))
    metrics = read_metrics(run)
    url = (run / "report.html").as_uri()

    dom = _browser(["--dump-dom", url], tmp_path / "profile1")
    assert dom.returncode == 0, dom.stderr[-2000:]
    parser = MetricsTableParser()
    parser.feed(dom.stdout)
    shown = parser.by_method()
    assert list(shown) == ["verifier_only", "verifier_only_b1"] == list(metrics["methods"])
    for method, d in metrics["methods"].items():
        value, text = shown[method]["Acc@1 %"]
        assert float(value) == pytest.approx(d["acc"])
        assert float(text) == pytest.approx(100 * d["acc"], abs=0.05)
        assert int(shown[method]["n"][1]) == d["n"] == 4
        silent_value, _ = shown[method]["silent %"]
        assert float(silent_value) == pytest.approx(d["silent_failure_rate"])
    n_problems = len({r["problem_id"] for r in read_rows(run)})
    assert len(re.findall(r'<details class="problem"', dom.stdout)) == n_problems
    assert all(s.startswith("data:image/png;base64,") for s in parser.srcs) and len(parser.srcs) >= 3

    # the metrics table's link to a method's wrong answers: the real script hides every other problem
    rows = read_rows(run)
    wrong = {r["problem_id"] for r in rows if r["method"] == "verifier_only" and not r["correct"]}
    dom = _browser(["--dump-dom", f"{url}#wrong=verifier_only"], tmp_path / "profile3")
    assert dom.returncode == 0, dom.stderr[-2000:]
    problems = re.findall(r'<details class="problem" data-problem="([^"]+)"[^>]*?( style="display: none;")?>',
                          dom.stdout)
    assert {pid for pid, hidden in problems if not hidden} == wrong and len(problems) == n_problems
    assert f"{len(wrong)} problems shown" in dom.stdout

    shot = tmp_path / "report.png"
    res = _browser([f"--screenshot={shot}", "--window-size=1280,1600", url], tmp_path / "profile2")
    assert res.returncode == 0 and shot.exists(), res.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as img:
        assert img.size == (1280, 1600)
        colors = img.convert("RGB").getcolors(maxcolors=1 << 20) or []
    assert len(colors) > 50, "the screenshot is blank"
