"""The frequency family: the core clock against active cores under scalar and vector loads."""

from __future__ import annotations

from hpcprobe import native
from hpcprobe.families.frequency import bench, views
from hpcprobe.measure.family import COUNT, Check, Default, Family, Headlines, Metrics, Params, specs

FAMILY = Family(
    "frequency", "core clock against active cores, integer and vector loads",
    bench.FrequencyOptions, bench.run, settings=bench.SETTINGS, plan=bench.labels,
    metrics=Metrics(specs("GHz", "higher", "clock", "scaling_cur_freq"), frozenset({"cpus"}),
                    params=(Params(("load", "active_cores", "placement", "cpus"),
                                   values={"load": {"enum": native.isa_names()},
                                           "active_cores": COUNT}),)),
    views=(views.tables,), figures=(views.figures,),
    capabilities=(Default(probe=True), Headlines(views.headlines), Check(bench.check_options)))
