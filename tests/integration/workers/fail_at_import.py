"""A training script broken at start-up: its first import fails, as a typo
or a missing package would make it (pytorch#60910)."""
import ctrun_test_module_that_does_not_exist  # noqa: F401
