"""`make deploy-test`: the multi-host deployment of docker/ built, started and faulted by a test."""
