"""Run profiles: the sampling rules every family shares. Each family declares its own budget and
knobs per profile (its `Settings`), so a profile here names no family."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from hpcprobe.common.errors import OptionError
from hpcprobe.common.stats import Repetition


@dataclass(frozen=True)
class Profile:
    """Sampling rules of one run profile."""

    name: str
    description: str
    repetition: Repetition
    sample_s: float  # shortest timed sample for cache-resident sizes
    curve_points: int | None  # most active-core counts in a curve (None: all)
    #: how long a result of this profile stands for its node (s): after it, a campaign's
    #: `--only stale` measures the node again (a quick look or a check is a day's; a reference
    #: measurement a month's)
    valid_s: float = 86400.0
    #: how long the node's idle power is read before the first benchmark where energy counters
    #: exist (s; RAPL updates every millisecond: a second is a mean of a thousand); 0: not
    #: read (a check in a prolog makes no job wait for it)
    idle_s: float = 1.0

    @property
    def help(self) -> str:
        r = self.repetition
        return (f"{self.description}; {r.min_samples}-{r.max_samples} samples a figure, CI "
                f"target ±{100 * r.target:g} %")


PROFILES: dict[str, Profile] = {
    p.name: p for p in (
        Profile("quick", "a first look: each family's shortest plan and budget",
                repetition=Repetition(0.02, 3, 10), sample_s=0.001, curve_points=8),
        Profile("default", "each family's full plan",
                repetition=Repetition(0.02, 5, 30), sample_s=0.002, curve_points=16,
                valid_s=7 * 86400.0),
        Profile("thorough", "reference measurements: denser sweeps, longer budgets",
                repetition=Repetition(0.01, 10, 100), sample_s=0.01, curve_points=None,
                valid_s=30 * 86400.0),
    )
}


#: The health tier (`hpcprobe check`): each taking part family's headline point alone, in
#: seconds. Not a `--profile` of `run`: only the families that declare `Check` have its settings.
CHECK = Profile("check", "the health tier: each checking family's headline point, seconds",
                repetition=Repetition(0.03, 3, 7), sample_s=0.001, curve_points=1, idle_s=0.0)


def valid_until(created: str, profile: str, valid_s: float | None = None) -> datetime:
    """Until when a result created at `created` (ISO 8601) by `profile` stands: the profile's
    window (a day for `check`, and for a name an older version used), or `valid_s`."""
    window = PROFILES.get(profile, CHECK).valid_s if valid_s is None else valid_s
    return datetime.fromisoformat(created) + timedelta(seconds=window)


def get(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise OptionError(f"<profile> {name!r} is unknown; profiles: {', '.join(PROFILES)}"
                          ) from None
