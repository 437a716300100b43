"""Tests of rolltap.pool (a package, so the tests can share ``pool_fakes``)."""
