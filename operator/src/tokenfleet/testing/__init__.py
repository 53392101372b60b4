"""Test and demo support that ships with the package: the emulated Kubernetes API.

kmock_cluster.py is kmock (a Kubernetes API emulator by kopf's author) plus the apiserver
behaviour the operator relies on. The integration tests and `tokenfleet demo` both import
it from here, so the demo runs from an installed wheel (`pip install "tokenfleet[demo]"`).
It needs the `kmock` package, an optional dependency (the `demo` and `test` extras); the
operator itself never imports this subpackage.
"""
