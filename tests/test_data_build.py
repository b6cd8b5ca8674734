"""`pcr-ray data build`: parquet per data set, stats, the command line, and the Ray Dataset helper."""

from __future__ import annotations

import json

import pytest

from pcr_ray.core.verifier import verify
from pcr_ray.data.build import build, main, read_problems_parquet, write_problems_parquet
from pcr_ray.data.physics import generate_problems


def test_build_writes_parquet_and_stats(tmp_path, data_dir):
    cfg = {"data_dir": str(data_dir), "out_dir": str(tmp_path), "datasets": ["gsm8k_test", "math500", "physics"],
           "physics": {"n": 60, "seed": 4}, "extraction": {"physics_n": 50}, "stats_file": "stats.json"}
    stats = build(cfg)
    d = stats["datasets"]
    assert d["gsm8k_test"]["count"] == 1319 and d["math500"]["count"] == 500 and d["physics"]["count"] == 60
    assert d["gsm8k_test"]["conversion"]["rate"] >= 0.85
    assert d["gsm8k_test"]["with_trace"] == d["gsm8k_test"]["conversion"]["converted"]
    assert 0.0 < d["gsm8k_test"]["extraction"]["complete_value_only"] <= 1.0
    assert stats["physics_extraction"]["n"] == 50
    on_disk = json.loads((tmp_path / "stats.json").read_text())
    assert on_disk["datasets"]["physics"]["count"] == 60
    gsm = read_problems_parquet(tmp_path / "gsm8k_test.parquet")
    assert len(gsm) == 1319 and gsm[0].id == "gsm8k/test/0" and gsm[0].answer_value == 18.0
    traced = [p for p in gsm if p.gold_trace]
    assert verify(traced[0].gold_trace).ok
    m5 = read_problems_parquet(tmp_path / "math500.parquet")
    assert m5[0].level == 2 and m5[0].answer_value is None and m5[0].gold_trace is None
    assert not list(tmp_path.glob("*.tmp"))


def test_parquet_roundtrip_is_exact(tmp_path):
    probs = generate_problems(30, seed=9)
    path = write_problems_parquet(probs, tmp_path / "p.parquet")
    back = read_problems_parquet(path)
    assert back == probs


def test_cli(tmp_path, capsys, monkeypatch, data_dir):
    assert main([]) == 2 and "usage" in capsys.readouterr().out
    assert main(["--help"]) == 0
    assert main(["nonsense"]) == 2
    assert main(["build", "not an override"]) == 2
    rc = main(["build", f"out_dir={tmp_path}", "datasets=[physics]", "physics.n=25", "extraction.physics_n=0"])
    assert rc == 0
    built = read_problems_parquet(tmp_path / "physics.parquet")
    assert len(built) == 25 and {p.gold_trace["meta"]["template_split"] for p in built} == {"heldout"}
    assert "physics" in capsys.readouterr().out
    monkeypatch.setenv("PCR_RAY_DATA", str(tmp_path / "missing"))
    rc = main(["build", f"out_dir={tmp_path}", "datasets=[math500]", "extraction.physics_n=0"])
    err = capsys.readouterr().err
    assert rc == 1 and "math500/test.jsonl" in err and "PCR_RAY_DATA" in err


@pytest.mark.ray
def test_ray_dataset_helper(ray_session):
    from pcr_ray.data.ray_dataset import dataset_to_problems, problems_to_dataset

    probs = generate_problems(40, seed=5)
    ds = problems_to_dataset(probs)
    assert ds.count() == 40
    rows = ds.take_all()
    assert {r["id"]: len(json.loads(r["gold_trace"])["steps"]) for r in rows} == {p.id: p.gold_steps for p in probs}
    assert sorted(dataset_to_problems(ds), key=lambda p: p.id) == sorted(probs, key=lambda p: p.id)
    with pytest.raises(ValueError):
        problems_to_dataset([])
