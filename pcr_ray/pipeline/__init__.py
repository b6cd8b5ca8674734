"""Ray entry points and pipelines: pairs (Ray Data), PRM training (Ray Train), evaluation."""
