"""eosmirror's development tools, outside the shipped package. Installed with the dev group only.

``kit`` holds what every suite and the tests use (clusters, waits, workloads, oracles); each suite sits on
the kit alone: ``bench`` (``make bench``, ``make lagbench``), ``chaos`` (``make chaos``), ``soak``
(``make soak``), ``deploy`` (``make deploy-test``), ``matrix`` (``make matrix``) and ``demo``
(``eosmirror demo``). ``local`` is the name ``eosmirror local`` and ``eosmirror setup`` load the kit's
clusters by."""
