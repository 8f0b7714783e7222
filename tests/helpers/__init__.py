"""What the tests share besides fixtures: processes, fakes, waits, failpoints, golden files.
Tests import these modules by name; conftest.py holds fixtures and hooks only."""
