"""What cpufreq says about a CPU (governor, limits, current frequency), where sysfs has it."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from hpcprobe.common.kernelfiles import read_text

SYSFS_CPU = "/sys/devices/system/cpu"


def _ghz(path: Path) -> float | None:
    """A cpufreq file in kHz as GHz."""
    text = read_text(path)
    try:
        return None if text is None else int(text) / 1e6
    except ValueError:
        return None


@dataclass(frozen=True)
class Policy:
    """The cpufreq policy of one CPU: driver, governor and limits (GHz)."""

    driver: str | None
    governor: str | None
    min_ghz: float | None
    max_ghz: float | None

    def to_dict(self) -> dict[str, object]:
        return {"driver": self.driver, "governor": self.governor, "min_ghz": self.min_ghz,
                "max_ghz": self.max_ghz}


def policy(cpu: int, root: str = SYSFS_CPU) -> Policy | None:
    """The cpufreq policy of `cpu`, None where the kernel exposes no cpufreq (many VMs)."""
    d = Path(root) / f"cpu{cpu}" / "cpufreq"
    if not d.is_dir():
        return None
    return Policy(read_text(d / "scaling_driver"), read_text(d / "scaling_governor"),
                  _ghz(d / "scaling_min_freq"), _ghz(d / "scaling_max_freq"))


def base_ghz(model_name: str | None, cpu: int = 0, root: str = SYSFS_CPU
             ) -> tuple[float, str] | None:
    """The base (nominal) clock the CPU states, and where it says so: its model name ("... @
    2.10GHz"), cpufreq's base_frequency (intel_pstate), or ACPI CPPC's nominal_freq (MHz); None
    where it states none (many VMs, most AMD model names)."""
    m = re.search(r"@\s*([0-9.]+)\s*GHz", model_name or "")
    if m:
        return float(m.group(1)), "model name"
    d = Path(root) / f"cpu{cpu}"
    ghz = _ghz(d / "cpufreq" / "base_frequency")
    if ghz:
        return ghz, "cpufreq base_frequency"
    mhz = read_text(d / "acpi_cppc" / "nominal_freq")
    if mhz and mhz.isdigit() and int(mhz) > 0:
        return int(mhz) / 1000, "ACPI CPPC nominal_freq"
    return None


def current_ghz(cpu: int, root: str = SYSFS_CPU) -> float | None:
    """scaling_cur_freq of `cpu` in GHz (what the kernel last saw; not a measurement of ours)."""
    return _ghz(Path(root) / f"cpu{cpu}" / "cpufreq" / "scaling_cur_freq")


@dataclass
class CurrentSampler:
    """Reads scaling_cur_freq of some CPUs from a helper thread while a measurement runs (the
    native core releases the interpreter), so the readings fall inside the measurement."""

    cpus: tuple[int, ...]
    delay_s: float
    root: str = SYSFS_CPU
    readings: list[float] = field(default_factory=list)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        time.sleep(self.delay_s)
        self.readings = [g for g in (current_ghz(c, self.root) for c in self.cpus)
                         if g is not None]

    def __enter__(self) -> CurrentSampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._thread is not None
        self._thread.join()

