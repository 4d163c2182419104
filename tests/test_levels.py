"""Cache-plateau identification on synthetic curves."""

from hpcprobe.levels import check_levels

KiB, MiB = 1 << 10, 1 << 20
SHARES = [("L1", 48 * KiB), ("L2", 2 * MiB), ("L3", 32 * MiB)]


def curve(l1, l2, l3, dram, edges=(48 * KiB, 2 * MiB, 32 * MiB)):
    pts = []
    size = 8 * KiB
    while size <= 512 * MiB:
        bw = (l1 if size <= edges[0] else l2 if size <= edges[1]
              else l3 if size <= edges[2] else dram)
        pts.append((size, bw))
        size *= 2
    return pts


def test_matching_curve_agrees():
    checks = check_levels(curve(400, 120, 60, 15), SHARES)
    assert [c.level for c in checks] == ["L1", "L2", "L3"]
    assert all(c.agrees for c in checks), [c.note for c in checks]
    assert checks[0].plateau_gbs == 400 and checks[2].plateau_gbs == 60


def test_l3_smaller_than_claimed_disagrees():
    checks = check_levels(curve(400, 120, 60, 15, edges=(48 * KiB, 2 * MiB, 4 * MiB)), SHARES)
    l3 = checks[2]
    assert l3.agrees is False and "L3" in l3.note


def test_missing_plateau_disagrees():
    checks = check_levels(curve(400, 120, 15, 15), SHARES)
    assert checks[2].agrees is False and "no plateau" in checks[2].note


def test_too_few_points():
    checks = check_levels([(8 * KiB, 400.0)], SHARES)
    assert all(c.agrees is None for c in checks)
