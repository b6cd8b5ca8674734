"""The scoring service beyond loopback: an API key is required (env or file), checked in constant time, never
echoed; loopback needs none; starting on 0.0.0.0 without one is refused unless explicitly allowed."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

pytest.importorskip("httpx")
from fastapi.testclient import TestClient  # noqa: E402

from pcr_ray.serve.app import ServeSettings, auth_for, create_app  # noqa: E402
from pcr_ray.serve.auth import ApiKeyAuth, is_loopback  # noqa: E402

EXAMPLE = json.loads((Path(__file__).resolve().parent.parent / "pcr_ray" / "examples" / "car_from_rest.json")
                     .read_text())
KEY = secrets.token_urlsafe(32)


def _verify(c: TestClient, **headers: str):
    return c.post("/v1/verify", json={"trace": EXAMPLE}, headers=headers)


def test_non_loopback_without_key_refuses_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PCR_RAY_API_KEY", raising=False)
    for host in ("0.0.0.0", "::", "192.168.1.7", "example.org"):
        with pytest.raises(ValueError, match="needs an API key"):
            create_app(None, ServeSettings.from_mapping(dict(host=host)))
    from pcr_ray.configs import compose
    from pcr_ray.serve.deploy import run

    assert run(compose("serve", ["host=0.0.0.0", "prm_enabled=false"]), block=False) == 2  # before Ray is touched
    with pytest.warns(RuntimeWarning, match="WITHOUT AN API KEY"):
        app = create_app(None, ServeSettings.from_mapping(dict(host="0.0.0.0", allow_unauthenticated=True)))
    with TestClient(app) as c:
        assert _verify(c).status_code == 200


def test_wrong_or_missing_key_is_401_and_the_key_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PCR_RAY_API_KEY", KEY)
    with TestClient(create_app(None, ServeSettings.from_mapping(dict(host="0.0.0.0")))) as c:
        r = _verify(c)
        assert r.status_code == 401 and "API key" in r.json()["detail"]
        assert r.headers["www-authenticate"].startswith("Bearer")
        for bad in ({"X-API-Key": KEY[:-1] + ("A" if KEY[-1] != "A" else "B")},
                    {"Authorization": f"Bearer {KEY}x"}, {"Authorization": f"Basic {KEY}"}, {"X-API-Key": ""}):
            r = _verify(c, **bad)
            assert r.status_code == 401, bad
            assert KEY not in r.text
        assert _verify(c, **{"X-API-Key": KEY}).json()["ok"] is True
        assert _verify(c, Authorization=f"Bearer {KEY}").status_code == 200
        assert c.get("/v1/info").status_code == 401 and c.get("/openapi.json").status_code == 401
        assert c.get("/healthz").status_code == 200  # liveness stays open
        big = c.post("/v1/verify", content=b"x" * (4 << 20), headers={"Content-Type": "application/json"})
        assert big.status_code == 401  # refused before its body is read


def test_key_from_a_file_and_bad_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PCR_RAY_API_KEY", raising=False)
    f = tmp_path / "key"
    f.write_text(KEY + "\n")
    with TestClient(create_app(None, ServeSettings.from_mapping(dict(host="10.0.0.5", api_key_file=str(f))))) as c:
        assert _verify(c).status_code == 401
        assert _verify(c, **{"X-API-Key": KEY}).status_code == 200
    f.write_text("short\n")
    with pytest.raises(ValueError, match="shorter than 16"):
        auth_for(ServeSettings.from_mapping(dict(host="0.0.0.0", api_key_file=str(f))))
    with pytest.raises(ValueError, match="cannot be read"):
        auth_for(ServeSettings.from_mapping(dict(host="0.0.0.0", api_key_file=str(tmp_path / "missing"))))
    f.write_text(KEY)
    auth = auth_for(ServeSettings.from_mapping(dict(host="0.0.0.0", api_key_file=str(f))))
    assert auth.key_digest and KEY not in repr(auth) and KEY not in auth.key_digest


def test_loopback_needs_no_key_but_a_configured_key_is_enforced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PCR_RAY_API_KEY", raising=False)
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.3.2.1", "localhost", "::1", "[::1]"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "", "::", "10.0.0.1", "example.org"))
    with TestClient(create_app(None, ServeSettings.from_mapping(dict(host="127.0.0.1")))) as c:
        assert _verify(c).status_code == 200
    monkeypatch.setenv("PCR_RAY_API_KEY", KEY)
    with TestClient(create_app(None, ServeSettings.from_mapping(dict(host="127.0.0.1")))) as c:
        assert _verify(c).status_code == 401 and _verify(c, **{"X-API-Key": KEY}).status_code == 200


def test_serve_config_has_the_auth_settings() -> None:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from pcr_ray.paths import conf_dir

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose(config_name="serve", overrides=["host=0.0.0.0", "allow_unauthenticated=true"])
    s = ServeSettings.from_mapping(OmegaConf.to_container(cfg, resolve=True))
    assert (s.host, s.allow_unauthenticated, s.api_key_env, s.api_key_file) == ("0.0.0.0", True,
                                                                               "PCR_RAY_API_KEY", None)
    assert ApiKeyAuth(None).accepts({}) == ""
