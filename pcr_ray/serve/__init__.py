"""The scoring service: `app` (FastAPI, Ray-free), `models` (pydantic), `deploy` (Ray Serve)."""
