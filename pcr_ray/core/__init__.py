"""The symbolic core: trace DSL, units, temperature roles, naming, primitives and the verifier.
Pure Python over pint and SymPy: never imports Ray or torch (tests/test_layers.py checks)."""
