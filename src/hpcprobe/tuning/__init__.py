"""Tuning sweeps (`hpcprobe sweep FILE`): configurations as data (environment, OpenMP, options,
pre/post commands and sysfs settings restored afterwards, reboot-only states by boot tag), the
chosen families and applications under each in interleaved rounds, and a recommendation per
workload."""
