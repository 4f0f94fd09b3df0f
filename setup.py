"""Build hook (the rest of the project's metadata is in pyproject.toml): the top-level ``hub_cards/``
(model-card and metric-card templates) and ``spaces_app/`` (the explorer Space's files, as pushed)
are shipped inside the wheel as ``hf_attn/hub_cards/`` and ``hf_attn/spaces_app/``, so that an
installed hf_attn can publish cards and Spaces without a checkout. ``hf_attn.hub.push`` finds them in
either place."""

from setuptools import find_namespace_packages, setup

SHIPPED_FOLDERS = {"hf_attn.hub_cards": "hub_cards", "hf_attn.spaces_app": "spaces_app"}

setup(packages=[*find_namespace_packages(include=["hf_attn", "hf_attn.*"]), *SHIPPED_FOLDERS],
      package_dir=SHIPPED_FOLDERS)
