"""cpufreq readings from a fake sysfs tree, and their absence (most VMs)."""

from hpcprobe.machine import cpufreq


def fake_sysfs(tmp_path, cpus=(0, 1), cur_khz=3_100_000):
    for c in cpus:
        d = tmp_path / f"cpu{c}" / "cpufreq"
        d.mkdir(parents=True)
        for name, value in (("scaling_driver", "acpi-cpufreq"), ("scaling_governor", "performance"),
                            ("scaling_min_freq", "1500000"), ("scaling_max_freq", "3700000"),
                            ("scaling_cur_freq", str(cur_khz))):
            (d / name).write_text(value + "\n")
    return str(tmp_path)


def test_policy_and_current_frequency(tmp_path):
    root = fake_sysfs(tmp_path)
    pol = cpufreq.policy(1, root)
    assert pol == cpufreq.Policy("acpi-cpufreq", "performance", 1.5, 3.7)
    assert pol.to_dict()["max_ghz"] == 3.7
    assert cpufreq.current_ghz(0, root) == 3.1


def test_no_cpufreq_is_none(tmp_path):
    assert cpufreq.policy(0, str(tmp_path)) is None
    assert cpufreq.current_ghz(0, str(tmp_path)) is None


def test_garbage_reads_as_unknown(tmp_path):
    root = fake_sysfs(tmp_path, cpus=(0,))
    (tmp_path / "cpu0" / "cpufreq" / "scaling_cur_freq").write_text("n/a\n")
    assert cpufreq.current_ghz(0, root) is None


def test_sampler_reads_during_the_block(tmp_path):
    root = fake_sysfs(tmp_path, cur_khz=2_500_000)
    with cpufreq.CurrentSampler((0, 1), delay_s=0.0, root=root) as s:
        pass
    assert s.readings == [2.5, 2.5]
    with cpufreq.CurrentSampler((0,), delay_s=0.0, root=str(tmp_path / "none")) as s:
        pass
    assert s.readings == []
