"""Fixture cases of labs 03 and later, one module per lab; see scripts/make_fixtures.py."""
