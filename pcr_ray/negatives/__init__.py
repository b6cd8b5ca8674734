"""Every kind of negative step in one place: CSP and random perturbation (`csp`), search-matched
(`search_pairs`), mined from a PRM's own ranking (`mined`), and the pair records they become (`pairs`).
Pure Python: no Ray, no torch."""
