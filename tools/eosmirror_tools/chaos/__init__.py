"""Exactly-once under faults: ``python -m eosmirror_tools.chaos`` (``make chaos``).

Modelled on Apache Kafka's transactions system test (``transactions_test.py`` with its
``TransactionalMessageCopier``) and Connect's exactly-once source test: seed numbered records, copy
them while a fault strikes, then check the copy with an oracle that can fail. See harness.py.
"""
