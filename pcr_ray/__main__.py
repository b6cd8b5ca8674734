"""`python -m pcr_ray` is `pcr-ray`."""

import sys

from pcr_ray.cli import main

sys.exit(main())
