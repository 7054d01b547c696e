"""The names the product loads the kit by (``eosmirror local``, ``eosmirror setup``): see cluster.py, runtime.py."""
