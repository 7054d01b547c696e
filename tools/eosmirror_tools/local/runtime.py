"""The product's path to the kit's runtime module: `eosmirror local` and `eosmirror setup` load
``eosmirror_tools.local.runtime`` by name (plugins/eosmirror/cliapp.py). This name is that module itself,
not a copy; the code lives in eosmirror_tools/kit/runtime.py."""

import sys

from eosmirror_tools.kit import runtime

sys.modules[__name__] = runtime
