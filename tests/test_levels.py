"""Cache-plateau identification on synthetic curves."""

from hpcprobe.analysis.levels import GUEST_NOTE, check_levels, edge_seen
from hpcprobe.common.units import format_bytes

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
    assert checks[0].plateau == 400 and checks[2].plateau == 60


def test_l3_smaller_than_claimed_disagrees():
    small = curve(400, 120, 60, 15, edges=(48 * KiB, 2 * MiB, 4 * MiB))
    l3 = check_levels(small, SHARES)[2]
    assert l3.agrees is False and "L3" in l3.note and GUEST_NOTE not in l3.note
    # on a virtual CPU, the likely cause is said; a level larger than claimed has another
    assert check_levels(small, SHARES, virtual=True)[2].note == l3.note + GUEST_NOTE
    large = check_levels(curve(400, 120, 60, 15, edges=(48 * KiB, 2 * MiB, 256 * MiB)),
                         SHARES, virtual=True)[2]
    assert large.agrees is False and GUEST_NOTE not in large.note
    [bracketed] = check_levels([(64 * KiB, 200.0), (256 * KiB, 200.0), (4 * MiB, 100.0)],
                               [("L3", 32 * MiB)], virtual=True)  # ends between, both short
    assert bracketed.agrees is False and bracketed.note.endswith(GUEST_NOTE)


def test_missing_level_disagrees():
    checks = check_levels(curve(400, 120, 15, 15), SHARES)
    assert checks[1].agrees is True  # L2 ends where it should, straight into DRAM
    assert checks[2].agrees is False and "not seen as a distinct level" in checks[2].note


def test_too_few_points():
    checks = check_levels([(8 * KiB, 400.0)], SHARES)
    assert all(c.agrees is None for c in checks)


def test_latency_sweep_is_judged_by_its_rate():
    lat = [(s, 1000.0 / bw) for s, bw in curve(400, 120, 60, 15)]  # rises level by level
    checks = check_levels(lat, SHARES, unit="ns", lower_is_better=True)
    assert all(c.agrees for c in checks), [c.note for c in checks]
    assert checks[0].plateau == 2.5 and "2.5 ns plateau" in checks[0].note


def test_gradual_rise_past_a_small_l3_is_a_disagreement():
    """A VM's L3: 40 ns at 4 MiB, then DRAM-like from 8 MiB while 32 MiB are claimed."""
    lat = [(8 * KiB, 1.4), (32 * KiB, 1.4), (128 * KiB, 4.6), (1 * MiB, 4.8), (4 * MiB, 40.0),
           (8 * MiB, 112.0), (16 * MiB, 115.0), (64 * MiB, 112.0), (1024 * MiB, 480.0)]
    checks = check_levels(lat, SHARES, unit="ns", lower_is_better=True)
    assert [c.agrees for c in checks] == [True, True, False]
    assert 4 * MiB < checks[2].edge_bytes < 8 * MiB


#: A 1-thread load sweep on a Zen 5 guest (32 MiB L3), recorded when the sweep still stopped at
#: the L3 share (as a guest whose cache outlasts the octave past it still reads): the last cache
#: point within EDGE_RATIO of the plateau, then the DRAM working set.
ZEN5_LOAD = [(9216, 557.0), (33792, 571.4), (64512, 203.3), (261120, 211.5), (1047552, 143.6),
             (2098176, 124.8), (8389632, 138.9), (16776192, 128.2), (33555456, 83.3),
             (968125440, 38.9)]


def test_an_edge_between_far_apart_points_is_bounded_not_placed():
    """The step lies somewhere between the last cache point and the DRAM point: the middle of
    the two (171 MiB, 'disagrees') is no estimate, and a bracket wider than the window around
    the capacity cannot say where the level ends."""
    l3 = check_levels(ZEN5_LOAD, SHARES[:1] + [("L2", 1 * MiB), ("L3", 32 * MiB)])[2]
    assert l3.agrees is None and l3.edge_between == (33555456, 968125440)
    assert l3.note == ("L3: 128.2 GB/s plateau ends between 32.0 MiB and 923.3 MiB per thread "
                       "(no sweep point between): it cannot be placed against the 32 MiB per "
                       "thread the topology reports")
    assert edge_seen(l3.to_dict()) == "32.0 MiB-923.3 MiB"
    # a bracket within the window settles it
    [l2] = check_levels([(64 * KiB, 200.0), (450 * KiB, 200.0), (2400 * KiB, 100.0)],
                        [("L2", 1 * MiB)])
    assert l2.agrees is True and "ends between 450 KiB and 2.3 MiB per thread, agrees" in l2.note


def test_a_far_bracket_beyond_the_window_still_disagrees():
    """The same sweep against a claimed 4 MiB L3: the plateau holds to 32 MiB, so the edge is
    surely more than EDGE_TOLERANCE past the claim."""
    l3 = check_levels(ZEN5_LOAD, SHARES[:1] + [("L2", 1 * MiB), ("L3", 4 * MiB)])[2]
    assert l3.agrees is False and "disagrees with the 4 MiB" in l3.note


def test_a_close_bracket_is_shown_as_its_middle_and_old_findings_read_as_before():
    l2 = check_levels(ZEN5_LOAD, SHARES[:1] + [("L2", 1 * MiB), ("L3", 32 * MiB)])[1]
    assert l2.edge_between == (1047552, 2098176) and "ends near" in l2.note
    assert edge_seen(l2.to_dict()) == format_bytes(l2.edge_bytes)
    stored = {k: v for k, v in l2.to_dict().items() if k != "edge_between"}
    assert edge_seen(stored) == format_bytes(l2.edge_bytes)


def test_a_plateau_is_the_level_s_own_figures_not_those_past_its_step():
    """A guest whose L3 shrank to a few MiB (host contention) while 32 MiB are claimed: the
    plateau is that of 2-4 MiB, not the middle of a 9 ns and a 106 ns point."""
    lat = [(32 * KiB, 0.9), (64 * KiB, 3.2), (512 * KiB, 3.2), (1 * MiB, 5.1), (2 * MiB, 8.6),
           (4 * MiB, 9.3), (8 * MiB, 109.2), (16 * MiB, 105.9), (32 * MiB, 103.3),
           (64 * MiB, 164.9), (1024 * MiB, 160.5)]
    l3 = check_levels(lat, SHARES[:1] + [("L2", 1 * MiB), ("L3", 32 * MiB)], unit="ns",
                      lower_is_better=True)[2]
    assert l3.agrees is False and l3.edge_between == (4 * MiB, 8 * MiB)
    assert l3.note.startswith("L3: 8.9 ns plateau ends near 5.7 MiB per thread, disagrees")


def test_a_level_whose_first_point_is_past_its_half_has_that_point_as_its_plateau():
    checks = check_levels([(8 * KiB, 400.0), (4 * MiB, 60.0), (512 * MiB, 15.0)], SHARES)
    assert [c.plateau for c in checks] == [400.0, 60.0, 60.0]
    assert [c.agrees for c in checks] == [None, None, None]  # 8 KiB-4 MiB, 4-512 MiB: too loose
