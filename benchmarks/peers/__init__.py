"""One module per framework, each running the same benchmark scenarios with its own test/fake model."""
