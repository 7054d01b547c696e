"""The product's path to the kit's cluster module: `eosmirror local` and `eosmirror setup` load
``eosmirror_tools.local.cluster`` by name (plugins/eosmirror/cliapp.py). This name is that module itself,
not a copy; the code lives in eosmirror_tools/kit/cluster.py."""

import sys

from eosmirror_tools.kit import cluster

sys.modules[__name__] = cluster
