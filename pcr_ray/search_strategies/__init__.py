"""Search strategies behind pcr_ray.search.run_search: lock-step beam search and best-of-N, one file each."""
