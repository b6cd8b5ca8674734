"""The configs live in conf/ at the top of the repository; the wheel ships them as the package data pcr_ray/conf."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["pcr_ray*"]), "pcr_ray.conf"], package_dir={"pcr_ray.conf": "conf"})
