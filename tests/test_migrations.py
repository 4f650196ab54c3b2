"""The migrations' table: one numbered function per schema version, each saying what it
does, so adding one is one function and one entry."""

from __future__ import annotations

from notewell.index import schema


def test_migration_n_is_the_function_named_for_n_with_a_docstring():
    assert len(schema.MIGRATIONS) == schema.SCHEMA_VERSION
    for n, migration in enumerate(schema.MIGRATIONS, 1):
        assert migration.__name__ == f"_migrate_{n}"
        assert (migration.__doc__ or "").strip(), f"migration {n} says nothing"
    assert len(schema.migrations(64)) == schema.SCHEMA_VERSION
