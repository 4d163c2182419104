"""The GPU family: inventory and locality, BabelStream's device memory bandwidth against the
memory's peak, cuBLAS GEMM per precision against the peak at the SM clock read during the run,
pinned host<->device bandwidth from each NUMA domain against the PCIe link, peer copies; the
clocks, power, throttle reasons and PCIe link beside each figure; the GPUs' health (memory
errors and the resets they need) as the run's findings (and as a node fact of every run:
machine/gpuhealth.py). `gpu info` and `gpu check` (a job's
binding, sharing, health)."""

from __future__ import annotations

from hpcprobe.families.gpu import bench, locality, views
from hpcprobe.measure.family import (
    Ceilings,
    Command,
    Default,
    Family,
    Headlines,
    Keeps,
    Metrics,
    OtherDevice,
    per_watt_specs,
    specs,
)
from hpcprobe.results.ceilings import Bound

FAMILY = Family(
    "gpu", "NVIDIA GPUs: HBM bandwidth, GEMM per precision, host<->device per NUMA domain, "
    "peer copies, with clocks and throttling",
    bench.GpuOptions, bench.run, plan=bench.plan, settings=bench.SETTINGS,
    metrics=Metrics((*specs("GB/s", "higher", "bandwidth", "copy", "p2p"),
                     *specs("GB/s", "higher", "bandwidth_peak", "copy_peak", derived=True),
                     *specs("TFLOP/s", "higher", "gemm"),
                     *specs("TFLOP/s", "higher", "gemm_peak", derived=True),
                     *specs("%", "higher", "bandwidth_fraction", "gemm_fraction",
                            "copy_fraction", derived=True),
                     # the board's power NVML read while each figure ran, and it per watt
                     *per_watt_specs(("bandwidth", "GB/s"), ("gemm", "TFLOP/s"),
                                     ("copy", "GB/s"))), bench.NOT_JOINED),
    views=(views.tables,), figures=(views.figures,),
    capabilities=(Headlines(views.headlines),
        Ceilings((Bound("gpu", "bandwidth", views.memory_ceiling),
                  Bound("gpu", "gemm", views.gemm_ceiling),
                  Bound("gpu", "copy", views.copy_ceiling))),
        Default(),
        # host copies bound by PCIe: 55 GB/s on an H100 node whose DRAM read 100+
        OtherDevice("NVIDIA GPUs"),
        locality.INVENTORY,
        Keeps((locality.GPU,)),
        Command(
            help="GPU measurements, `gpu info` (inventory, locality) or `gpu check` (binding)",
            description="Device memory bandwidth (BabelStream), cuBLAS GEMM per precision, "
                        "pinned host<->device bandwidth from each NUMA domain and peer copies, "
                        "built with the nvcc found; `gpu info` shows the GPUs and what is near "
                        "them, `gpu check` this job's GPU binding, GPUs shared while others "
                        "idle and GPUs due for a reset or replacement (exit 1 on a finding).",
            actions={"info": ("show the GPUs, their NUMA domains, local CPUs, nearby NICs/NVMe",
                              bench.info),
                     "check": ("check this process's GPU binding, GPU sharing and GPU health",
                               bench.check)}),
    ))
