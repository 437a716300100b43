"""The store on SQLite, PostgreSQL and MariaDB: one class, every case, each backend."""

from __future__ import annotations

from store.cases_attempts import AttemptCases
from store.cases_cli import CliCases
from store.cases_commit import CommitCases
from store.cases_create import CreateCases
from store.cases_faults import FaultCases
from store.cases_forks import ForkCases
from store.cases_ids import IdCases
from store.cases_leases import LeaseCases
from store.cases_outage import OutageCases
from store.cases_placement import PlacementCases
from store.cases_schema_0006 import Schema0006Cases
from store.cases_scorings import ScoringCases
from store.cases_sets import SetCases
from store.cases_summary import SummaryCases


class TestStore(
    CommitCases,
    CreateCases,
    ForkCases,
    FaultCases,
    CliCases,
    IdCases,
    OutageCases,
    LeaseCases,
    SummaryCases,
    PlacementCases,
    Schema0006Cases,
    AttemptCases,
    ScoringCases,
    SetCases,
):
    """Parametrized over the three backends through the ``store_url`` fixture."""
