"""The suites `--suite` accepts, each registered once with what the rest of the tool asks of it.

A **suite** (`Suite`) is a name with its builder `(lengths, depths, trials, seed) -> recipes`, its
VERSION (part of the reuse key), its family (`ruler`, `mrcr`: a family name selects its suites in
registration order), its cases' own answer budget (sent when --max-tokens is not given), its scorer
("recall": pass/miss verdicts of recall_eval.scoring, or a metric of recall_eval.metrics), whether it
has a no-context form, and its report section ("recall": the recall heatmap and tables; "tasks": the
scored-task table and a score heatmap). Suite modules register themselves: `@REGISTRY.suite(...)` on
a builder, or `REGISTRY.add(Suite(...))`.

A **form** (`SuiteForm`) is a pattern of names: prepared files (`jsonl:PATH`, `ruler-jsonl:PATH`) and
no-context baselines (`SUITE~nocontext`). The parser asks each registered form, in order, whether it
claims an item; then families, then suites; no name is special to it.

Third-party suites register through the `recall_eval.suites` entry-point group: each entry point names
a `Suite`, a list of them, or a function called with the registry. They are loaded on first use.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from recall_eval.errors import BadInput, UserError
from recall_eval.types import CaseRecipe

SuiteBuilder = Callable[[Sequence[int], Sequence[float], int, int], Iterable[CaseRecipe]]
Section = Literal["recall", "tasks"]
ENTRY_POINT_GROUP = "recall_eval.suites"


@dataclass(frozen=True)
class Suite:
    """One registered suite."""

    name: str
    build: SuiteBuilder
    version: int  # bumped with any change to what it renders (recall_eval.reuse)
    family: str | None = None
    budget: int | None = None  # its cases' own answer budget (Case.max_tokens); None: the run's max_tokens
    scorer: str = "recall"  # "recall" (pass/miss) or the metric its cases are graded with (Case.metric)
    no_context: bool = False  # has a no-context form (each recipe's bare_case(): suites/no_context.py)

    @property
    def section(self) -> Section:
        """Where reports show it: a pass/miss suite in the recall figures, a scored one in the task table."""
        return "recall" if self.scorer == "recall" else "tasks"


class SuiteForm(Protocol):
    """A pattern of suite names (a prepared file, a no-context baseline), registered like a suite."""

    pattern: str  # as help and error lines show it ("jsonl:PATH", "SUITE~nocontext")

    def claims(self, item: str) -> bool:
        """Whether this item of --suite is written in this form."""
        ...

    def expand(self, item: str, registry: Registry, option: str) -> list[str]:
        """The suite names the item selects, checked (BadInput naming `option`)."""
        ...

    def recipes(
        self,
        name: str,
        registry: Registry,
        lengths: Sequence[int],
        depths: Sequence[float],
        trials: int,
        seed: int,
    ) -> list[CaseRecipe]: ...

    def version(self, name: str, registry: Registry) -> int: ...


class Registry:
    """The registered suites and forms (one instance: REGISTRY)."""

    def __init__(self, group: str = ENTRY_POINT_GROUP):
        self._suites: dict[str, Suite] = {}
        self._forms: list[SuiteForm] = []
        self._group = group
        self._plugins_loaded = False

    # ---- registering ---------------------------------------------------------------------------------

    def add(self, suite: Suite) -> Suite:
        if suite.name in self._suites or suite.name in self._family_names():
            raise ValueError(f"suite {suite.name!r} is registered twice")
        if suite.family in self._suites:
            raise ValueError(f"family {suite.family!r} of suite {suite.name!r} is a suite's name")
        if any(form.claims(suite.name) for form in self._forms) or "," in suite.name:
            raise ValueError(f"suite name {suite.name!r} is a form's pattern or holds a comma")
        self._suites[suite.name] = suite
        return suite

    def suite(
        self,
        name: str,
        *,
        version: int,
        family: str | None = None,
        budget: int | None = None,
        scorer: str = "recall",
        no_context: bool = False,
    ) -> Callable[[SuiteBuilder], SuiteBuilder]:
        """Decorator: register the decorated builder as suite `name`."""

        def register(build: SuiteBuilder) -> SuiteBuilder:
            self.add(Suite(name, build, version, family, budget, scorer, no_context))
            return build

        return register

    def add_form(self, form: SuiteForm) -> SuiteForm:
        self._forms.append(form)
        return form

    def load_plugins(self) -> None:
        """Register the suites of installed packages (entry points of the `recall_eval.suites` group), once."""
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        for entry in importlib.metadata.entry_points(group=self._group):
            try:
                found = entry.load()
                if isinstance(found, Suite):
                    self.add(found)
                elif isinstance(found, list | tuple):
                    for suite in found:
                        self.add(suite)
                else:
                    found(self)
            except Exception as err:  # a broken plugin is named, with its own message
                raise UserError(
                    f"suite plugin {entry.name!r} ({entry.value}) failed to register: "
                    f"{type(err).__name__}: {err}; fix or uninstall the package that provides it"
                ) from None

    # ---- reading -------------------------------------------------------------------------------------

    def suites(self) -> dict[str, Suite]:
        self.load_plugins()
        return dict(self._suites)

    def families(self) -> dict[str, tuple[str, ...]]:
        """Family name -> its suites, in registration order."""
        self.load_plugins()
        return {family: self._members(family) for family in self._family_names()}

    def _family_names(self) -> list[str]:
        return list(dict.fromkeys(s.family for s in self._suites.values() if s.family))

    def _members(self, family: str) -> tuple[str, ...]:
        return tuple(name for name, suite in self._suites.items() if suite.family == family)

    def get(self, name: str) -> Suite:
        """The registered suite of that name (BadInput naming the known ones)."""
        found = self.suites().get(name)
        if found is None:
            raise BadInput(f"unknown suite {name!r}; known suites: {', '.join(sorted(self._suites))}")
        return found

    def form_of(self, name: str) -> SuiteForm | None:
        self.load_plugins()
        return next((form for form in self._forms if form.claims(name)), None)

    def known_names(self) -> tuple[str, ...]:
        """What --suite accepts, for help and error lines: suites, families, the forms' patterns."""
        return (*self.suites(), *self.families(), *(form.pattern for form in self._forms))

    def parse(self, spec: str, option: str = "--suite") -> tuple[str, ...]:
        """A comma list of suites, families (expanded in place) and forms (each form expands its own)."""
        names: list[str] = []
        families = self.families()
        for item in (part.strip() for part in spec.split(",")):
            if not item:
                raise BadInput(
                    f"{option} {spec!r}: write comma-separated suite names ({', '.join(self.known_names())})"
                )
            form = self.form_of(item)
            if form is not None:
                names.extend(form.expand(item, self, option))
            elif item in families:
                names.extend(families[item])
            elif item in self._suites:
                names.append(item)
            else:
                raise BadInput(f"{option} {spec!r}: unknown suite {item!r}" + self._hint(item))
        if len(set(names)) != len(names):
            raise BadInput(f"{option} {spec!r}: a suite is repeated (a family already holds its suites)")
        return tuple(names)

    def _hint(self, item: str) -> str:
        near = [name for name in self._suites if name.startswith(item + "~")]
        if len(near) == 1:  # RULER's tasks with this project's filler: niah_single_2~filler
            return f"; RULER's essay haystack is replaced here: use {near[0]}"
        return f" (known: {', '.join(self.known_names())})"

    def recipes(
        self, name: str, lengths: Sequence[int], depths: Sequence[float], trials: int, seed: int
    ) -> list[CaseRecipe]:
        """Recipes of one suite (or form) over the grid. Unknown suite: BadInput."""
        form = self.form_of(name)
        if form is not None:
            return form.recipes(name, self, lengths, depths, trials, seed)
        return list(self.get(name).build(lengths, depths, trials, seed))

    def version(self, name: str) -> int:
        form = self.form_of(name)
        return form.version(name, self) if form is not None else self.get(name).version


REGISTRY = Registry()
