"""How a hit is told: the data's message and fix with the placeholders filled, or, for a family whose
fix needs judgement the data cannot hold (`refine: true`), the function registered with `@refines`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from builder.explain.context import ExplainContext
from builder.explain.matching import Hit
from builder.findings import Severity


@dataclass(frozen=True)
class Refined:
    message: str
    fix: str
    severity: Severity | None = None


Refiner = Callable[[Hit, ExplainContext], Refined]
REFINERS: dict[str, Refiner] = {}


def refines(family_id: str) -> Callable[[Refiner], Refiner]:
    """Register `fn(hit, context) -> Refined` for the data family `family_id` (which says `refine: true`)."""

    def register(fn: Refiner) -> Refiner:
        if family_id in REFINERS:
            raise ValueError(f"{family_id} is refined twice")
        REFINERS[family_id] = fn
        return fn

    return register


def default_said(hit: Hit) -> Refined:
    """The data's message and fix with the placeholders filled, the cause's why and fix, the code's fix."""
    message, fix = hit.text(hit.family.message), hit.text(hit.family.fix)
    if hit.code is not None and hit.code.family != hit.family.id and hit.code.fix:
        fix = hit.code.fix
    if hit.cause is not None:
        message = f"{message}: {hit.text(hit.cause.why)}"
        if hit.cause.fix and (hit.cause.when or not (hit.code and hit.code.fix)):
            fix = hit.text(hit.cause.fix)
    return Refined(message, fix)
