"""The test suite (a package: `from tests.support import ...`)."""
