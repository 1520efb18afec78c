"""Which night runs next (nightshift.nights): the decision behind the DAG's choose_batch, status's
pending list and run --pending. Pure: landed ids, applied ids and ledger rows in, a choice out."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from nightshift.nights import next_night, night_of, pending_batches
from runtime.errors import BadChangeBatch


@dataclass
class Row:  # the ledger row's fields the choice reads
    batch_id: str
    validated_at: str | None = "t"
    published_at: str | None = "t"


LANDED = ["b1", "b2", "b3", "b4"]


def test_nothing_landed_or_everything_done_means_no_night():
    assert next_night([], [], []).batch is None
    done = next_night(LANDED, LANDED, [Row(b) for b in LANDED])
    assert done.batch is None and "every one is applied and published" in done.why


def test_the_next_landed_batch_in_id_order():
    assert pending_batches(["b3", "b1", "b2"], ["b1"]) == ["b2", "b3"]
    assert next_night(LANDED, ["b1"], [Row("b1")]).batch == "b2"
    assert next_night(LANDED, [], []).batch == "b1"


def test_an_unvalidated_or_unpublished_night_comes_first():
    """A night whose validation failed (or that ran by the CLI, never validated) blocks the next ones."""
    choice = next_night(LANDED, ["b1", "b2"], [Row("b1"), Row("b2", validated_at=None, published_at=None)])
    assert choice.batch == "b2" and "not yet validated" in choice.why
    choice = next_night(LANDED, ["b1", "b2"], [Row("b1"), Row("b2", published_at=None)])
    assert choice.batch == "b2" and "not yet published" in choice.why
    refreshed = next_night(LANDED, ["b1"], [Row("b1"), Row("b2", validated_at=None, published_at=None)])
    assert refreshed.batch == "b2"  # refreshed, not yet applied to the base
    assert choice.refreshed and refreshed.refreshed  # their window has nothing left to do: the DAG's gate passes


def test_only_a_night_in_the_ledger_is_refreshed():
    assert not next_night(LANDED, ["b1"], [Row("b1")]).refreshed
    assert not night_of("b2", LANDED, ["b1"], [Row("b1")]).refreshed
    assert night_of("b1", LANDED, ["b1"], [Row("b1", validated_at=None)]).refreshed


def test_a_range_skips_done_nights_and_stops_at_its_end():
    nights = [Row("b1"), Row("b2")]
    assert next_night(LANDED, ["b1", "b2"], nights, first="b1", through="b3").batch == "b3"
    assert next_night(LANDED, ["b1", "b2", "b3"], nights + [Row("b3")], first="b1", through="b3").batch is None
    assert next_night(LANDED, [], [], through="b2").batch == "b1"
    assert next_night(LANDED, ["b1"], [Row("b1")], first="b3").batch == "b3"


def test_a_night_asked_for_by_id():
    assert night_of("b2", LANDED, ["b1"], [Row("b1")]).batch == "b2"
    done = night_of("b1", LANDED, ["b1"], [Row("b1")])
    assert done.batch is None and "already applied and published" in done.why
    assert night_of("b1", LANDED, ["b1"], [Row("b1", validated_at=None)]).batch == "b1"  # validate again
    assert night_of("b1", LANDED, ["b1", "b2"], [Row("b1", validated_at=None), Row("b2")]).batch is None
    with pytest.raises(BadChangeBatch, match=r"batch b9 has not landed: no folder lake/changes/<table>/batch_id=b9"):
        night_of("b9", LANDED, [], [])
